"""The scheduler's durable journal: SQLite in WAL mode under the state directory.

Everything the scheduler must not forget across a crash is written here before it acts on
it: jobs and their progress, checkpoints, runs (a job's stay on a worker) with their leases,
rounds with their allocations, workers, the last event sequence applied per worker, measured
throughputs, and the engine's whole state (meta `engine_state`). A completion
is recorded at most once (`record_completion` only updates a job that has none), and a job
with a completion is never launched again.
"""

from __future__ import annotations

import fcntl
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from shock.core.errors import ShockError
from shock.core.model import JobSpec

JOURNAL_FILE = "journal.sqlite"
LOCK_FILE = "scheduler.lock"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    job_id INTEGER PRIMARY KEY,
    spec TEXT NOT NULL,
    step INTEGER NOT NULL DEFAULT 0,
    checkpoint_step INTEGER NOT NULL DEFAULT 0,
    checkpoint_path TEXT,
    batch_size INTEGER,
    -- The job type and step target it runs at now (another batch size: Accordion, GNS).
    job_type TEXT,
    target_steps INTEGER,
    completed_at REAL,
    completed_by_run INTEGER
);
CREATE TABLE IF NOT EXISTS workers (
    worker_id TEXT PRIMARY KEY,
    hostname TEXT NOT NULL,
    gpu_type TEXT NOT NULL,
    gpus INTEGER NOT NULL,
    registered_at REAL NOT NULL,
    acked_seq INTEGER NOT NULL DEFAULT 0,
    dead_at REAL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL,
    worker_id TEXT NOT NULL,
    gpus TEXT NOT NULL,
    launched_at REAL NOT NULL,
    lease_until REAL NOT NULL,
    start_step INTEGER NOT NULL,
    resumed_from_step INTEGER,
    started_at REAL,
    last_step INTEGER NOT NULL,
    ended_at REAL,
    end_reason TEXT
);
CREATE TABLE IF NOT EXISTS rounds (
    round_index INTEGER PRIMARY KEY,
    started_at REAL NOT NULL,
    assignments TEXT NOT NULL
);
-- What happened to each job, in words, when (what `shock watch` replays).
CREATE TABLE IF NOT EXISTS job_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL,
    at REAL NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS job_events_by_job ON job_events (job_id, seq);
CREATE TABLE IF NOT EXISTS throughputs (
    job_type TEXT NOT NULL,
    scale_factor INTEGER NOT NULL,
    worker_type TEXT NOT NULL,
    steps_per_s REAL NOT NULL,
    samples INTEGER NOT NULL,
    PRIMARY KEY (job_type, scale_factor, worker_type)
);
"""


# A service's jobs: when each was submitted and first started, and how it ended when it did
# not complete (cancelled or failed, with a message).
_SERVICE_COLUMNS = (
    ("submitted_at", "REAL"),
    ("started_at", "REAL"),
    ("ended_state", "TEXT"),
    ("ended_at", "REAL"),
    ("message", "TEXT"),
    # Its finish-time fairness, fixed when it ended (docs/running-a-cluster.md).
    ("rho", "REAL"),
    # A person's own command (JSON, shock/cluster/job_command.py); NULL: a built-in family's.
    ("command", "TEXT"),
)


@dataclass(frozen=True, slots=True)
class JobRow:
    spec: JobSpec
    step: int
    checkpoint_step: int
    completed_at: float | None
    job_type: str | None = None  # None: still the trace's job type
    target_steps: int | None = None
    submitted_at: float | None = None  # None: a trace's job
    started_at: float | None = None
    ended_state: str | None = None  # cancelled or failed
    ended_at: float | None = None
    message: str | None = None
    rho: float | None = None
    command: str | None = None


@dataclass(frozen=True, slots=True)
class JobEventRow:
    seq: int
    job_id: int
    at: float
    text: str


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: int
    job_id: int
    worker_id: str
    gpus: tuple[int, ...]
    launched_at: float
    lease_until: float
    start_step: int
    resumed_from_step: int | None
    started_at: float | None
    last_step: int
    ended_at: float | None
    end_reason: str | None


@dataclass(frozen=True, slots=True)
class WorkerRow:
    worker_id: str
    hostname: str
    gpu_type: str
    gpus: int
    acked_seq: int
    dead_at: float | None


@dataclass(frozen=True, slots=True)
class ThroughputRow:
    job_type: str
    scale_factor: int
    worker_type: str
    steps_per_s: float
    samples: int


class Journal:
    """One SQLite database; every method is a single transaction. Not thread-safe by itself:
    the scheduler calls it under its own lock."""

    def __init__(self, state_dir: Path) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        # One scheduler per state directory; the OS drops the lock when the process dies.
        self._lock_file = (state_dir / LOCK_FILE).open("a")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_file.close()
            raise ShockError(
                f"another scheduler is using the state directory {state_dir}"
            ) from None
        self.path = state_dir / JOURNAL_FILE
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL survives any process crash (kill -9); only a power loss may lose the
        # last transactions.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        # A journal written before jobs had a current type: add the columns (both NULL).
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
        for column, kind in (("job_type", "TEXT"), ("target_steps", "INTEGER"), *_SERVICE_COLUMNS):
            if column not in columns:
                self._db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self._db.close()
        self._lock_file.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # Meta: the run's start time, counters and anything else small.

    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # Jobs.

    def add_jobs(self, jobs: list[JobSpec]) -> None:
        with self.transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO jobs (job_id, spec) VALUES (?, ?)",
                [(job.job_id, json.dumps(asdict(job))) for job in jobs],
            )

    def add_submitted_job(self, job: JobSpec, at: float, command: str | None = None) -> None:
        self._db.execute(
            "INSERT INTO jobs (job_id, spec, submitted_at, command) VALUES (?, ?, ?, ?)",
            (job.job_id, json.dumps(asdict(job)), at, command),
        )

    def jobs(self) -> list[JobRow]:
        rows = self._db.execute(
            "SELECT spec, step, checkpoint_step, completed_at, job_type, target_steps, "
            "submitted_at, started_at, ended_state, ended_at, message, rho, command FROM jobs "
            "ORDER BY job_id"
        ).fetchall()
        return [JobRow(JobSpec(**json.loads(row[0])), *row[1:]) for row in rows]

    def set_job_started(self, job_id: int, at: float) -> None:
        """When the job first ran (its queueing time ends)."""
        self._db.execute(
            "UPDATE jobs SET started_at = ? WHERE job_id = ? AND started_at IS NULL", (at, job_id)
        )

    def end_job(self, job_id: int, state: str, at: float, message: str) -> None:
        """The job will not run again: cancelled or failed."""
        self._db.execute(
            "UPDATE jobs SET ended_state = ?, ended_at = ?, message = ? "
            "WHERE job_id = ? AND completed_at IS NULL AND ended_state IS NULL",
            (state, at, message, job_id),
        )

    def set_rho(self, job_id: int, rho: float) -> None:
        """The job's finish-time fairness, fixed once (when it ended)."""
        self._db.execute(
            "UPDATE jobs SET rho = ? WHERE job_id = ? AND rho IS NULL", (rho, job_id)
        )

    def add_job_event(self, job_id: int, at: float, text: str) -> None:
        self._db.execute(
            "INSERT INTO job_events (job_id, at, text) VALUES (?, ?, ?)", (job_id, at, text)
        )

    def job_events(self, job_id: int, after_seq: int = 0) -> list[JobEventRow]:
        """The job's events after `after_seq`, oldest first."""
        rows = self._db.execute(
            "SELECT seq, job_id, at, text FROM job_events WHERE job_id = ? AND seq > ? "
            "ORDER BY seq", (job_id, after_seq),
        ).fetchall()  # fmt: skip
        return [JobEventRow(*row) for row in rows]

    def set_progress(self, job_id: int, step: int) -> None:
        # A completed job's row is final: a late or resent event must not move it back.
        self._db.execute(
            "UPDATE jobs SET step = ? WHERE job_id = ? AND completed_at IS NULL", (step, job_id)
        )

    def set_checkpoint(self, job_id: int, step: int, path: str) -> None:
        self._db.execute(
            "UPDATE jobs SET checkpoint_step = ?, checkpoint_path = ? "
            "WHERE job_id = ? AND completed_at IS NULL",
            (step, path, job_id),
        )

    def set_batch_size(self, job_id: int, batch_size: int) -> None:
        self._db.execute("UPDATE jobs SET batch_size = ? WHERE job_id = ?", (batch_size, job_id))

    def set_job_type(self, job_id: int, job_type: str, target_steps: int) -> None:
        """The job now runs as `job_type` (a new batch size) towards `target_steps`."""
        self._db.execute(
            "UPDATE jobs SET job_type = ?, target_steps = ? WHERE job_id = ?",
            (job_type, target_steps, job_id),
        )

    def record_completion(self, job_id: int, at: float, run_id: int, step: int) -> bool:
        """Record a job's completion; False (and no change) if it already has one."""
        cursor = self._db.execute(
            "UPDATE jobs SET completed_at = ?, completed_by_run = ?, step = ? "
            "WHERE job_id = ? AND completed_at IS NULL",
            (at, run_id, step, job_id),
        )
        return cursor.rowcount == 1

    # Workers.

    def add_worker(self, row: WorkerRow, at: float) -> None:
        self._db.execute(
            "INSERT INTO workers (worker_id, hostname, gpu_type, gpus, registered_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (row.worker_id, row.hostname, row.gpu_type, row.gpus, at),
        )

    def workers(self) -> list[WorkerRow]:
        rows = self._db.execute(
            "SELECT worker_id, hostname, gpu_type, gpus, acked_seq, dead_at FROM workers "
            "ORDER BY registered_at, worker_id"
        ).fetchall()
        return [WorkerRow(*row) for row in rows]

    def set_worker_alive(self, worker_id: str) -> None:
        self._db.execute("UPDATE workers SET dead_at = NULL WHERE worker_id = ?", (worker_id,))

    def set_worker_dead(self, worker_id: str, at: float) -> None:
        self._db.execute("UPDATE workers SET dead_at = ? WHERE worker_id = ?", (at, worker_id))

    def set_acked_seq(self, worker_id: str, seq: int) -> None:
        self._db.execute(
            "UPDATE workers SET acked_seq = ? WHERE worker_id = ?", (seq, worker_id)
        )

    # Runs.

    def add_run(
        self, job_id: int, worker_id: str, gpus: tuple[int, ...], at: float, lease_until: float,
        start_step: int,
    ) -> int:
        cursor = self._db.execute(
            "INSERT INTO runs (job_id, worker_id, gpus, launched_at, lease_until, start_step, "
            "last_step) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (job_id, worker_id, json.dumps(list(gpus)), at, lease_until, start_step, start_step),
        )
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    def set_run_lease(self, run_id: int, lease_until: float) -> None:
        self._db.execute("UPDATE runs SET lease_until = ? WHERE run_id = ?", (lease_until, run_id))

    def set_run_started(self, run_id: int, resumed_from_step: int, at: float) -> None:
        self._db.execute(
            "UPDATE runs SET resumed_from_step = ?, started_at = ? WHERE run_id = ?",
            (resumed_from_step, at, run_id),
        )

    def set_run_step(self, run_id: int, step: int) -> None:
        self._db.execute("UPDATE runs SET last_step = ? WHERE run_id = ?", (step, run_id))

    def end_run(self, run_id: int, at: float, reason: str) -> None:
        self._db.execute(
            "UPDATE runs SET ended_at = ?, end_reason = ? WHERE run_id = ? AND ended_at IS NULL",
            (at, reason, run_id),
        )

    def correct_run_completed(self, run_id: int, at: float, step: int) -> None:
        """A run closed as lost that then reported its job's completion did complete."""
        self._db.execute(
            "UPDATE runs SET ended_at = ?, end_reason = 'done', last_step = ? WHERE run_id = ?",
            (at, step, run_id),
        )

    def runs(self, open_only: bool = False) -> list[RunRow]:
        query = (
            "SELECT run_id, job_id, worker_id, gpus, launched_at, lease_until, start_step, "
            "resumed_from_step, started_at, last_step, ended_at, end_reason FROM runs"
        )
        if open_only:
            query += " WHERE ended_at IS NULL"
        rows = self._db.execute(query + " ORDER BY run_id").fetchall()
        return [
            RunRow(r[0], r[1], r[2], tuple(json.loads(r[3])), *r[4:]) for r in rows
        ]

    def gpu_seconds_by_user(self, since: float, until: float) -> dict[str, float]:
        """GPU-seconds each user's runs held GPUs between `since` and `until` (unix times):
        a run holds its GPUs from its launch until it ended (or until `until`)."""
        rows = self._db.execute(
            "SELECT COALESCE(json_extract(jobs.spec, '$.entity'), ''), "
            "SUM(json_array_length(runs.gpus) * "
            "    (MIN(COALESCE(runs.ended_at, :until), :until) - MAX(runs.launched_at, :since))) "
            "FROM runs JOIN jobs ON jobs.job_id = runs.job_id "
            "WHERE COALESCE(runs.ended_at, :until) > :since AND runs.launched_at < :until "
            "GROUP BY 1",
            {"since": since, "until": until},
        ).fetchall()
        return {str(user): float(seconds) for user, seconds in rows if seconds and seconds > 0}

    # Rounds and throughputs.

    def add_round(self, index: int, at: float, assignments: list[dict[str, object]]) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO rounds (round_index, started_at, assignments) VALUES (?, ?, ?)",
            (index, at, json.dumps(assignments)),
        )

    def rounds(self) -> list[tuple[int, float, list[dict[str, object]]]]:
        rows = self._db.execute(
            "SELECT round_index, started_at, assignments FROM rounds ORDER BY round_index"
        ).fetchall()
        return [(index, at, json.loads(text)) for index, at, text in rows]

    def set_throughput(self, row: ThroughputRow) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO throughputs VALUES (?, ?, ?, ?, ?)",
            (row.job_type, row.scale_factor, row.worker_type, row.steps_per_s, row.samples),
        )

    def throughputs(self) -> list[ThroughputRow]:
        rows = self._db.execute("SELECT * FROM throughputs").fetchall()
        return [ThroughputRow(*row) for row in rows]
