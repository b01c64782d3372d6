"""Importers of public production traces: `shock trace import FORMAT FILE... -o OUT`.

Each format's reader streams its files line by line (or, for Philly's JSON list, job by job)
into `RawJob`s; `shaping` makes the shock trace. Formats: philly, helios, pai2020,
alibaba2023 (see docs/traces.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.throughputs import ThroughputTable
from shock.traces.importers.alibaba2023 import OPENB_PHASES, OpenbOptions, read_alibaba2023
from shock.traces.importers.helios import HELIOS_STATES, HeliosOptions, read_helios
from shock.traces.importers.pai2020 import PAI_STATUSES, PaiOptions, read_pai2020
from shock.traces.importers.philly import (
    ATTEMPT_RULES,
    PHILLY_STATUSES,
    PhillyOptions,
    read_philly,
)
from shock.traces.importers.records import RawJob, ReadCounts
from shock.traces.importers.shaping import ImportSummary, ShapeOptions, shape_jobs


@dataclass(frozen=True, slots=True)
class ImporterInfo:
    name: str
    description: str
    statuses: tuple[str, ...]  # the status values the trace uses
    default_statuses: tuple[str, ...]
    entities: tuple[str, ...]  # which of user, vc the trace records
    read: Callable[[list[Path], tuple[str, ...], str, ReadCounts], Iterator[RawJob]]


def _philly(paths: list[Path], statuses: tuple[str, ...], attempts: str, counts: ReadCounts
            ) -> Iterator[RawJob]:
    chosen = PHILLY_STATUSES if "any" in statuses else statuses
    return read_philly(paths, PhillyOptions(chosen, attempts), counts)  # type: ignore[arg-type]


def _helios(paths: list[Path], statuses: tuple[str, ...], _a: str, counts: ReadCounts
            ) -> Iterator[RawJob]:
    return read_helios(paths, HeliosOptions(statuses), counts)


def _pai(paths: list[Path], statuses: tuple[str, ...], _a: str, counts: ReadCounts
         ) -> Iterator[RawJob]:
    return read_pai2020(paths, PaiOptions(statuses), counts)


def _openb(paths: list[Path], statuses: tuple[str, ...], _a: str, counts: ReadCounts
           ) -> Iterator[RawJob]:
    return read_alibaba2023(paths, OpenbOptions(statuses), counts)


IMPORTERS: dict[str, ImporterInfo] = {
    info.name: info
    for info in (
        ImporterInfo("philly", "Microsoft Philly cluster_job_log (JSON)", PHILLY_STATUSES,
                     ("Pass",), ("user", "vc"), _philly),
        ImporterInfo("helios", "SenseTime Helios cluster_log.csv", HELIOS_STATES,
                     ("COMPLETED",), ("user", "vc"), _helios),
        ImporterInfo("pai2020", "Alibaba PAI 2020 pai_job_table.csv + pai_task_table.csv",
                     PAI_STATUSES, ("Terminated",), ("user",), _pai),
        ImporterInfo("alibaba2023", "Alibaba GPU 2023 openb_pod_list_*.csv", OPENB_PHASES,
                     ("any",), (), _openb),
    )
}


def import_trace(
    format_name: str,
    paths: list[Path],
    options: ShapeOptions,
    table: ThroughputTable,
    *,
    statuses: tuple[str, ...] | None = None,
    attempts: str = "last",
) -> tuple[list[JobSpec], ImportSummary]:
    """The shock jobs for a production trace, and a summary of what was kept and dropped."""
    info = IMPORTERS.get(format_name)
    if info is None:
        raise InputError(
            f"unknown trace format '{format_name}'; importers: {', '.join(IMPORTERS)}",
            field="FORMAT",
        )
    if not paths:
        raise InputError("no file given", field="FILE")
    chosen = statuses or info.default_statuses
    unknown = [s for s in chosen if s != "any" and s not in info.statuses]
    if unknown:
        raise InputError(
            f"{', '.join(unknown)} not a status of {format_name} traces "
            f"({', '.join(info.statuses)}, or any)",
            field="--status",
        )
    if attempts not in ATTEMPT_RULES:
        raise InputError(
            f"expected one of {', '.join(ATTEMPT_RULES)}, got '{attempts}'", field="--attempts"
        )
    counts = ReadCounts()
    summary = ImportSummary()
    jobs = shape_jobs(
        info.read(paths, chosen, attempts, counts), options, table, summary, known=info.entities
    )
    summary.merge(counts)
    if not jobs:
        dropped = "; ".join(f"{reason}: {n}" for reason, n in sorted(summary.dropped.items()))
        raise InputError(
            f"no job left to write: read {summary.read}"
            + (f", dropped {dropped}" if dropped else "")
            + " (see --status and the other filters)",
            path=paths[0] if len(paths) == 1 else None,
        )
    return jobs, summary
