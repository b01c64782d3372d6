"""Importers of public production traces: `shock trace import FORMAT FILE... -o OUT`.

Each format's reader streams its files line by line (or, for Philly's JSON list, job by job)
into `RawJob`s; `shaping` makes the shock trace. The importers are plugins (kind "trace
importer", hook `register_trace_importers`); the built-in ones are philly, helios, pai2020 and
alibaba2023 (see docs/traces.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.plugins import PluginRegistry, default_registry
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
class TraceImporter:
    """A production-trace importer: what its trace records, and its reader."""

    name: str
    description: str
    statuses: tuple[str, ...]  # the status values the trace uses
    default_statuses: tuple[str, ...]
    entities: tuple[str, ...]  # which of user, vc the trace records
    # (files, statuses to keep or ("any",), Philly's attempts rule, counts) -> recorded jobs
    read: Callable[[list[Path], tuple[str, ...], str, ReadCounts], Iterator[RawJob]]


def _philly(
    paths: list[Path], statuses: tuple[str, ...], attempts: str, counts: ReadCounts
) -> Iterator[RawJob]:
    chosen = PHILLY_STATUSES if "any" in statuses else statuses
    return read_philly(paths, PhillyOptions(chosen, attempts), counts)  # type: ignore[arg-type]


def _helios(
    paths: list[Path], statuses: tuple[str, ...], _attempts: str, counts: ReadCounts
) -> Iterator[RawJob]:
    return read_helios(paths, HeliosOptions(statuses), counts)


def _pai(
    paths: list[Path], statuses: tuple[str, ...], _attempts: str, counts: ReadCounts
) -> Iterator[RawJob]:
    return read_pai2020(paths, PaiOptions(statuses), counts)


def _openb(
    paths: list[Path], statuses: tuple[str, ...], _attempts: str, counts: ReadCounts
) -> Iterator[RawJob]:
    return read_alibaba2023(paths, OpenbOptions(statuses), counts)


BUILT_IN_IMPORTERS: tuple[TraceImporter, ...] = (
    TraceImporter(
        name="philly",
        description="Microsoft Philly cluster_job_log (JSON list of jobs)",
        statuses=PHILLY_STATUSES,
        default_statuses=("Pass",),
        entities=("user", "vc"),
        read=_philly,
    ),
    TraceImporter(
        name="helios",
        description="SenseTime Helios cluster_log.csv",
        statuses=HELIOS_STATES,
        default_statuses=("COMPLETED",),
        entities=("user", "vc"),
        read=_helios,
    ),
    TraceImporter(
        name="pai2020",
        description="Alibaba PAI 2020 pai_job_table.csv and pai_task_table.csv",
        statuses=PAI_STATUSES,
        default_statuses=("Terminated",),
        entities=("user",),
        read=_pai,
    ),
    TraceImporter(
        name="alibaba2023",
        description="Alibaba GPU 2023 openb_pod_list_*.csv (pods with CPU and memory requests)",
        statuses=OPENB_PHASES,
        default_statuses=("any",),
        entities=(),
        read=_openb,
    ),
)


def import_trace(
    format_name: str,
    paths: list[Path],
    options: ShapeOptions,
    table: ThroughputTable,
    *,
    statuses: tuple[str, ...] | None = None,
    attempts: str = "last",
    registry: PluginRegistry | None = None,
) -> tuple[list[JobSpec], ImportSummary]:
    """The shock jobs for a production trace, and a summary of what was kept and dropped."""
    info: TraceImporter = (registry or default_registry()).get("trace importer", format_name)
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
