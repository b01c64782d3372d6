"""The next allocation, computed in a second process while the rounds before it run.

A long simulation spends much of its time in the policy: building its problem, solving it and
checking the answer, with one core busy and the other idle. Between two allocations the
mechanism can predict the jobs of the next one: arrivals are known, and the jobs that will
have left are those close to their end. For a policy that declares itself `stateless`, the
predicted input goes to a worker process (`allocation_worker.py`) that computes the
allocation while the main process plays the rounds. When the allocation comes due, the answer
computed ahead is used only if its input equals the real one in every field the policy (and
the allocation check) read; otherwise the policy runs on the spot, as always. So results are
the same with or without it.

A process, not a thread: the policy's Python then runs in parallel too, not only the solver.
Both sides spin on the connection while they expect a message instead of sleeping on it,
since waking a sleeping process costs about as much as a small solve on a virtual machine; they
spin on a non-blocking peek, not poll(), so that the other side's writes wake nobody
(`nonblocking_socket.py`). The worker computes one allocation further than it is asked for (see
`allocation_worker.py`), and messages carry their arrays as raw bytes. The
worker starts only once a run has made enough allocations to be worth it, and the run goes on
synchronously until it is ready (or for good, if it cannot start or dies).

A policy that reads the jobs' views (progress, arrival times) cannot be predicted: a predicted
input has none, and the first such read turns the look-ahead off for the run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from typing import Any, Protocol

import numpy as np

from shock.core.allocation_prediction import (
    ArrivalTable,
    NextStep,
    PackedArray,
    PredictedInput,
    PredictedJobs,
    packed,
    same_value,
    unpacked,
)
from shock.core.model import JobSpec
from shock.core.nonblocking_socket import NonBlockingSocket
from shock.core.policy import Allocation, Policy, PolicyInput
from shock.core.solver import SolverSpec
from shock.core.throughputs import ThroughputTable

_log = logging.getLogger(__name__)

# The worker starts once a run has made this many allocations and still has this many jobs to
# go (arriving or active): a short run never pays for a process (starting one slows this
# one down for a moment, and its first answers come late).
START_AFTER_ALLOCATIONS = 64
START_WITH_JOBS_LEFT = 256
# Set to "0" to turn the look-ahead off in this process (a sweep's parallel cells do: each
# core runs a cell already).
ENVIRONMENT_SWITCH = "SHOCK_ALLOCATE_AHEAD"
# Misses in a row after which the look-ahead stops for the run (its predictions do not match
# what this policy reads).
_MISSES_BEFORE_GIVING_UP = 16
# How long the main process polls for an answer before it sleeps on the connection.
_SPIN_S = 0.005
# The longest it waits for an answer the worker is computing (it would take as long here).
_ANSWER_TIMEOUT_S = 600.0


def wanted() -> bool:
    """Whether this process may use a worker: a second CPU, and not switched off."""
    if os.environ.get(ENVIRONMENT_SWITCH, "1") == "0":
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return cpus > 1


class Arrivals(Protocol):
    """The run's jobs in arrival order, and how far they have arrived."""

    def schedule(self) -> Sequence[JobSpec]:
        """Every job of the run, in arrival order: the same object until the jobs change."""
        ...

    def next_index(self) -> int:
        """The index in `schedule` of the next job to arrive (its length: none is left)."""
        ...

    def jobs_left(self) -> int:
        """The run's jobs still to arrive or to finish."""
        ...


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """What the worker keeps for the whole run."""

    policy: Policy
    solver: SolverSpec
    table: ThroughputTable


@dataclass(frozen=True, slots=True)
class Answer:
    """The worker's answer to request `seq`: the allocation and the fields read, or why not.
    The allocation's keys and worker types are left out (None) where they are the request's
    (they usually are, and a thousand keys cost more to send than the shares)."""

    seq: int
    fractions: np.ndarray | None
    objective: float | None = None
    keys: tuple[Any, ...] | None = None
    worker_types: tuple[str, ...] | None = None
    round_order: tuple[Any, ...] | None = None
    fields_read: frozenset[str] = frozenset()
    needs_job_views: bool = False
    guessed: bool = False  # computed before it was asked for (see allocation_worker.py)

    @classmethod
    def of(cls, seq: int, allocation: Allocation, problem: PredictedInput) -> Answer:
        keys = allocation.keys
        worker_types = allocation.worker_types
        return cls(
            seq,
            np.asarray(allocation.fractions),
            allocation.objective,
            None if keys == problem.field("job_ids") else keys,
            None if worker_types == problem.field("worker_types") else worker_types,
            allocation.round_order,
            problem.fields_read(),
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _answer_of,
            (
                self.seq,
                None if self.fractions is None else packed(self.fractions),
                self.objective,
                self.keys,
                self.worker_types,
                self.round_order,
                "\n".join(self.fields_read),  # (one string pickles faster than a set)
                self.needs_job_views,
                self.guessed,
            ),
        )

    def again(self, seq: int) -> Answer:
        """This answer, made ahead, as the answer to request `seq`."""
        return Answer(
            seq,
            self.fractions,
            self.objective,
            self.keys,
            self.worker_types,
            self.round_order,
            self.fields_read,
            self.needs_job_views,
            True,
        )

    def allocation(self, jobs: PredictedJobs, ids: tuple[int, ...]) -> Allocation | None:
        if self.fractions is None:
            return None
        return Allocation(
            ids if self.keys is None else self.keys,
            jobs.worker_types if self.worker_types is None else self.worker_types,
            self.fractions,
            self.objective,
            self.round_order,
        )


def _answer_of(
    seq: int,
    fractions: PackedArray | None,
    objective: float | None,
    keys: tuple[Any, ...] | None,
    worker_types: tuple[str, ...] | None,
    round_order: tuple[Any, ...] | None,
    fields_read: str,
    needs_job_views: bool,
    guessed: bool,
) -> Answer:
    return Answer(
        seq,
        None if fractions is None else unpacked(fractions),
        objective,
        keys,
        worker_types,
        round_order,
        frozenset(fields_read.split("\n")) if fields_read else frozenset(),
        needs_job_views,
        guessed,
    )


@dataclass(slots=True)
class AheadStats:
    submitted: int = 0
    used: int = 0  # allocations answered by a computation made ahead
    guessed: int = 0  # of those, computed by the worker before the request came
    missed: int = 0  # allocations computed on the spot although one was predicted


def _framed(payload: bytes) -> bytes:
    """A message as `multiprocessing.connection.Connection` frames it (the worker reads it
    with `recv_bytes`): its length, then its bytes."""
    if len(payload) > 0x7FFFFFFF:
        return struct.pack("!i", -1) + struct.pack("!Q", len(payload)) + payload
    return struct.pack("!i", len(payload)) + payload


@dataclass(slots=True)
class _Pending:
    seq: int
    jobs: PredictedJobs
    ids: tuple[int, ...]  # its job ids as a tuple, as the input has them


@dataclass
class AllocationAhead:
    """One run's look-ahead: predicted inputs in, allocations out when they match."""

    policy: Policy
    solver: SolverSpec
    table: ThroughputTable
    arrivals: Arrivals
    start_after: int = field(default_factory=lambda: START_AFTER_ALLOCATIONS)
    start_with_jobs_left: int = field(default_factory=lambda: START_WITH_JOBS_LEFT)
    stats: AheadStats = field(default_factory=AheadStats)
    active: bool = True
    _allocations: int = 0
    _process: subprocess.Popen[bytes] | None = None
    _connection: Connection | None = None
    _socket: NonBlockingSocket | None = None  # the connection's, to peek and to send
    _newest: Answer | None = None  # the newest answer read and not yet used
    _ready: bool = False
    _seq: int = 0
    _pending: _Pending | None = None
    _misses_in_a_row: int = 0

    @property
    def predicting(self) -> bool:
        """Whether predictions are wanted now (the worker is ready for them)."""
        return self.active and self._ready_now()

    def send_arrivals(self, table: ArrivalTable) -> None:
        """The run's arrivals for the worker's predictions (`NextStep`s index them)."""
        if not self.predicting:
            return
        try:
            self._send_message(pickle.dumps(table, pickle.HIGHEST_PROTOCOL))
        except (OSError, EOFError) as error:
            self._give_up(f"the worker is gone ({error})")

    def submit(self, jobs: PredictedJobs, next_step: NextStep | None = None) -> None:
        """Have the worker compute the allocation of `jobs` (unless it has them already), and
        with `next_step`, predict and compute the one after it while it waits."""
        if not self.predicting:
            return
        ids = tuple(jobs.job_ids.tolist())
        pending = self._pending
        if pending is not None and pending.ids == ids:
            return
        self._seq += 1
        try:
            message = (self._seq, jobs, next_step)
            self._send_message(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))
        except (OSError, EOFError) as error:
            self._give_up(f"the worker is gone ({error})")
            return
        self._pending = _Pending(self._seq, jobs, ids)
        self.stats.submitted += 1

    def take(self, problem: PolicyInput) -> Allocation | None:
        """The allocation of `problem` if the one computed ahead answers it exactly; None (the
        caller runs the policy) otherwise."""
        self._allocations += 1
        if (
            self._process is None
            and self.active
            and self._allocations >= self.start_after
            and self.arrivals.jobs_left() >= self.start_with_jobs_left
        ):
            self._start()
        pending, self._pending = self._pending, None
        if pending is None or pending.ids != problem.job_ids:
            self._missed(pending is not None)
            self._read_waiting()  # (answers not read pile up in the connection)
            return None
        answer = self._answer(pending.seq)
        allocation = None if answer is None else answer.allocation(pending.jobs, pending.ids)
        if answer is not None and allocation is not None:
            jobs, table, ids = pending.jobs, self.table, pending.ids
            for name in answer.fields_read:
                if not same_value(getattr(problem, name), jobs.value(name, table, ids)):
                    allocation = None
                    break
        if answer is None or allocation is None:
            self._missed(True)
            return None
        self.stats.used += 1
        self.stats.guessed += answer.guessed
        self._misses_in_a_row = 0
        return allocation

    def close(self) -> None:
        """Stop the worker (it also stops by itself when this process goes away)."""
        connection, process, side = self._connection, self._process, self._socket
        self._connection = self._process = self._socket = None
        self.active = False
        if side is not None:
            # The stop request if it fits now; if not, closing the connection stops it too.
            with contextlib.suppress(OSError):
                side.send_some(memoryview(_framed(pickle.dumps(None))))
            side.close()
        if connection is not None:
            connection.close()
        if process is not None:
            if not self._ready:
                process.kill()  # still starting: nothing to wait for
            # It exits by itself (the stop request, or the connection closed); its exit is
            # collected on the side, so that the run does not wait for the interpreter's.
            threading.Thread(target=process.wait, name="shock-ahead-exit", daemon=True).start()
        if self.stats.submitted:
            _log.debug("allocations ahead: %s", self.stats)

    # The worker.

    def _start(self) -> None:
        try:
            setup = pickle.dumps(WorkerSetup(self.policy, self._sendable_solver(), self.table))
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            self._give_up(f"the policy cannot be sent to a worker ({error})")
            return
        ours, theirs = socket.socketpair()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "shock.core.allocation_worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                # Its own session: a Ctrl-C in the terminal reaches this process, which
                # stops it; the worker never prints a traceback of its own.
                start_new_session=True,
            )
        except OSError as error:
            ours.close()
            self._give_up(f"no worker process ({error})")
            return
        finally:
            theirs.close()
        self._connection = Connection(os.dup(ours.fileno()))
        self._socket = NonBlockingSocket(ours.fileno())
        ours.close()
        self._connection.send_bytes(setup)

    def _sendable_solver(self) -> SolverSpec:
        """The solver spec with its plugin, if that pickles (the worker then need not load
        the plugins to find it)."""
        try:
            pickle.dumps(self.solver)
        except (pickle.PicklingError, TypeError, AttributeError):
            return replace(self.solver, plugin=None)
        return self.solver

    def _ready_now(self) -> bool:
        if not self._ready:
            self._read_waiting()  # ("ready" may be among them)
        return self._ready

    def _send_message(self, payload: bytes) -> None:
        """Send one message, in pieces as they fit; while none fits, read what the worker
        sent (it may be waiting for room to send us an answer, and not reading)."""
        side = self._socket
        if side is None:
            raise OSError("no connection")
        data = memoryview(_framed(payload))
        deadline = time.perf_counter() + _ANSWER_TIMEOUT_S
        while data:
            sent = side.send_some(data)
            if sent:
                data = data[sent:]
                continue
            self._read_waiting()
            if time.perf_counter() > deadline:
                raise OSError("the worker stopped reading")
            side.wait(0.05)

    def _read_waiting(self) -> None:
        """Read every message that is there; keep the newest answer."""
        connection, side = self._connection, self._socket
        try:
            while connection is not None and side is not None and side.waiting():
                self._keep(pickle.loads(connection.recv_bytes()))
        except (OSError, EOFError) as error:
            self._give_up(f"the worker is gone ({error})")

    def _keep(self, message: object) -> None:
        """Keep what a message says: the worker is ready, or an answer (the newest)."""
        newest = self._newest
        if isinstance(message, Answer):
            if newest is None or message.seq > newest.seq:
                self._newest = message
        elif message == "ready":
            self._ready = True

    def _answer(self, seq: int) -> Answer | None:
        """The worker's answer to `seq` (older answers are dropped), waiting for it."""
        connection, side = self._connection, self._socket
        if connection is None or side is None:
            return None
        started = time.perf_counter()
        try:
            while True:
                newest = self._newest
                if newest is not None and newest.seq >= seq:
                    self._newest = None
                    if newest.needs_job_views:
                        self._give_up("the policy reads the jobs' views")
                    return newest
                waited = time.perf_counter() - started
                if waited < _SPIN_S:
                    arrived = side.waiting()
                else:
                    arrived = connection.poll(min(1.0, _ANSWER_TIMEOUT_S - waited))
                    if not arrived and waited >= _ANSWER_TIMEOUT_S:
                        self._give_up("the worker did not answer in time")
                        return None
                if arrived:
                    self._keep(pickle.loads(connection.recv_bytes()))
        except (OSError, EOFError) as error:
            self._give_up(f"the worker is gone ({error})")
            return None

    def _missed(self, counted: bool) -> None:
        if not (counted and self.active):
            return
        self.stats.missed += 1
        self._misses_in_a_row += 1
        if self._misses_in_a_row >= _MISSES_BEFORE_GIVING_UP:
            self._give_up(f"{self._misses_in_a_row} predictions in a row missed")

    def _give_up(self, why: str) -> None:
        if self.active:
            _log.debug("allocations ahead stop: %s", why)
        self.active = False
        self._pending = None
