"""Microsoft Philly (`cluster_job_log`): a JSON list of jobs.

Each job: `jobid`, `user`, `vc`, `status` (Pass, Killed or Failed), `submitted_time`, and
`attempts`, each with `start_time`, `end_time` and `detail` (one entry per server, `ip` and the
`gpus` it used). As Synergy's and Blox's parsers do: attempts whose start or end time is
missing (`None`) or that ran no time or on no GPU are skipped, a job with none left is
dropped, the GPU count is that of the attempt (all servers' GPUs), and the run time is the
last attempt's (`--attempts last`) or the sum over attempts (`--attempts sum`), or each
attempt is a job of its own that arrives when the previous one ended (`--attempts each`, the
parsers' default).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from shock.core.errors import InputError
from shock.traces.importers.records import RawJob, ReadCounts, Record, json_list_items, parse_time

PHILLY_STATUSES = ("Pass", "Killed", "Failed")
AttemptRule = Literal["last", "sum", "each"]
ATTEMPT_RULES = ("last", "sum", "each")


@dataclass(frozen=True, slots=True)
class PhillyOptions:
    statuses: tuple[str, ...] = ("Pass",)
    attempts: AttemptRule = "last"


def read_philly(paths: list[Path], options: PhillyOptions, counts: ReadCounts) -> Iterator[RawJob]:
    if len(paths) != 1:
        raise InputError(f"philly takes one file (cluster_job_log), got {len(paths)}")
    path = paths[0]
    for line, item in json_list_items(path):
        counts.read += 1
        yield from _jobs(path, line, item, options, counts)


def _jobs(
    path: Path, line: int, item: object, options: PhillyOptions, counts: ReadCounts
) -> list[RawJob]:
    record = Record(path, line, {})
    if not isinstance(item, dict):
        raise record.error(None, f"expected a job (a JSON object), got {type(item).__name__}")
    for key in ("jobid", "status", "submitted_time", "attempts"):
        if key not in item:
            raise record.error(key, "missing")
    status = item["status"]
    if status not in options.statuses:
        counts.drop(f"status {status}")
        return []
    submitted = parse_time(item["submitted_time"], record, "submitted_time")
    if submitted is None:
        counts.drop("no submission time")
        return []
    attempts = item["attempts"]
    if not isinstance(attempts, list):
        raise record.error("attempts", "expected a list")
    runs: list[tuple[float, float, int]] = []
    for attempt in attempts:
        run = _attempt(record, attempt)
        if run is not None:
            runs.append(run)
    if not runs:
        counts.drop("no attempt that ran")
        return []
    name, user, vc = str(item["jobid"]), _name(item.get("user")), _name(item.get("vc"))
    if options.attempts == "each":
        counts.read += len(runs) - 1  # each attempt is a job
        arrivals = [submitted] + [end for _start, end, _gpus in runs[:-1]]
        return [
            RawJob(f"{name}-attempt{k + 1}", arrival, end - start, gpus, user, vc)
            for k, (arrival, (start, end, gpus)) in enumerate(zip(arrivals, runs, strict=True))
        ]
    last_start, last_end, gpus = runs[-1]
    if options.attempts == "last":
        duration = last_end - last_start
    else:
        duration = sum(end - start for start, end, _gpus in runs)
    return [RawJob(name, submitted, duration, gpus, user, vc)]


def _attempt(record: Record, attempt: object) -> tuple[float, float, int] | None:
    """(start, end, GPUs) of an attempt that ran; None for one that did not."""
    if not isinstance(attempt, dict):
        raise record.error("attempts", "expected each attempt to be a JSON object")
    for key in ("start_time", "end_time", "detail"):
        if key not in attempt:
            raise record.error(f"attempts.{key}", "missing")
    start = parse_time(attempt["start_time"], record, "attempts.start_time")
    end = parse_time(attempt["end_time"], record, "attempts.end_time")
    if start is None or end is None or end <= start:
        return None
    detail = attempt["detail"]
    if not isinstance(detail, list):
        raise record.error("attempts.detail", "expected a list of servers")
    gpus = 0
    for server in detail:
        if not isinstance(server, dict) or not isinstance(server.get("gpus"), list):
            raise record.error("attempts.detail.gpus", "expected a list of GPUs for each server")
        gpus += len(server["gpus"])
    return (start, end, gpus) if gpus > 0 else None


def _name(value: object) -> str | None:
    return None if value in (None, "") else str(value)
