"""The results document written by `--json` (key names are a stable interface; docs/results.md).

Version 2, written to a file: `out.json` holds the run's setup, metrics and per-job results,
and names its timeline's side-car, `out.timeline.npz` (flat arrays, `timeline_columns`).
Version 1, the same document with the timeline inline as JSON, is what `to_document` gives
(`--json -`, sweep cells) and what older shock versions wrote; readers take both.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from shock.core.timeline import Timeline
from shock.core.timeline_columns import write_timeline_arrays

# The inline layout (`to_document`) and the file layout with a side-car (`write_json`).
INLINE_SCHEMA_VERSION = 1
SCHEMA_VERSION = 2
SIDECAR_SUFFIX = ".timeline.npz"


@dataclass(frozen=True, slots=True)
class RunResult:
    policy: str
    backend: str
    solver: str
    trace: str
    cluster: str
    preset: str
    metrics: Metrics
    records: tuple[JobRecord, ...]
    rhos: np.ndarray
    unfinished_jobs: int = 0
    placement: str = ""
    # How batch sizes changed: the simulator's rule set ("profile", "artifact-simulator"), or
    # "harness" where real jobs decided for themselves (grpc backend).
    adaptation_rules: str = "profile"
    # Round-by-round and job-by-job history (`"timeline"` in the document); None: not kept.
    timeline: Timeline | None = None

    def to_document(self) -> dict[str, object]:
        document = self._header(INLINE_SCHEMA_VERSION)
        if self.timeline is not None:
            document["timeline"] = self.timeline.to_json()
        return document

    def _header(self, version: int) -> dict[str, object]:
        """Everything but the timeline."""
        return {
            "schema_version": version,
            "policy": self.policy,
            "backend": self.backend,
            "solver": self.solver,
            "trace": self.trace,
            "cluster": self.cluster,
            "preset": self.preset,
            "placement": self.placement,
            "adaptation_rules": self.adaptation_rules,
            "metrics": {k: _finite_or_none(v) for k, v in asdict(self.metrics).items()},
            "unfinished_jobs": self.unfinished_jobs,
            "jobs": [
                {
                    "id": record.job_id,
                    "arrival_s": record.arrival_s,
                    "completion_s": record.completion_s,
                    "jct_s": record.jct_s,
                    "ftf_rho": _finite_or_none(float(rho)),
                }
                for record, rho in zip(self.records, self.rhos, strict=True)
            ],
        }

    def write_json(self, path: str | Path) -> None:
        """The version-2 document at `path`, its timeline in the side-car beside it
        (`sidecar_path`). Each file is written under a temporary name, then renamed, so an
        interrupted run never leaves half a document."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        document = self._header(SCHEMA_VERSION)
        renames: list[tuple[Path, Path]] = []
        if self.timeline is not None:
            sidecar = sidecar_path(path)
            temporary = sidecar.with_name(sidecar.name + ".tmp")
            write_timeline_arrays(self.timeline, temporary)
            renames.append((temporary, sidecar))
            document["timeline"] = {"file": sidecar.name, "format": "npz"}
        temporary = path.with_name(path.name + ".tmp")
        with temporary.open("w") as handle:
            write_document(document, handle)
        renames.append((temporary, path))
        for source, target in renames:  # the side-car first: the JSON names it
            source.replace(target)


def sidecar_path(path: Path) -> Path:
    """Where the timeline of the document at `path` goes: `out.json` -> `out.timeline.npz`."""
    return path.with_name(path.name.removesuffix(".json") + SIDECAR_SUFFIX)


def write_document(document: dict[str, object], handle: TextIO) -> None:
    """A document without an inline timeline as JSON: indented for reading, one job per
    line, written piece by piece (no text of the whole document is built)."""
    tail_keys = ("jobs", "timeline")
    rest = {key: value for key, value in document.items() if key not in tail_keys}
    text = json.dumps(rest, indent=2, allow_nan=False)
    # `rest` is a non-empty object: its text ends with "\n}".
    handle.write(text[:-2])
    jobs = document.get("jobs")
    if isinstance(jobs, list):
        handle.write(',\n  "jobs": [')
        for k, job in enumerate(jobs):
            handle.write(("\n    " if k == 0 else ",\n    ") + json.dumps(job, allow_nan=False))
        handle.write("\n  ]" if jobs else "]")
    if "timeline" in document:
        handle.write(',\n  "timeline": ' + json.dumps(document["timeline"], allow_nan=False))
    handle.write("\n}\n")


def document_text(document: dict[str, object]) -> str:
    """A results document as JSON text: indented for reading, except the timeline, whose
    long lists are written compactly (a 5,600-job run's would otherwise take ten times the
    space)."""
    rest = {key: value for key, value in document.items() if key != "timeline"}
    text = json.dumps(rest, indent=2, allow_nan=False)
    if "timeline" not in document:
        return text + "\n"
    timeline = json.dumps(document["timeline"], separators=(",", ":"), allow_nan=False)
    # `rest` is a non-empty object: its text ends with "\n}".
    return f'{text[:-2]},\n  "timeline": {timeline}\n}}\n'


def _finite_or_none(value: object) -> object:
    """JSON has no infinity: a non-finite number (a job with no isolated time) becomes null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


UNFAIR_RHO = 1.05


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: int
    arrival_s: float
    completion_s: float
    isolated_runtime_s: float  # alone on the fastest worker type, at its scale factor
    scale_factor: int = 1

    @property
    def jct_s(self) -> float:
        return self.completion_s - self.arrival_s


@dataclass(frozen=True, slots=True)
class RunCounters:
    """What the mechanism counted while running."""

    busy_gpu_seconds: float = 0.0
    preemptions: int = 0
    lease_extensions: int = 0
    placements: int = 0  # scheduled (job, round) units, the denominator of the extension share
    rounds: int = 0
    allocations: int = 0
    solver_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Metrics:
    jobs: int
    avg_jct_s: float
    makespan_s: float
    p50_jct_s: float
    p90_jct_s: float
    p99_jct_s: float
    utilization: float
    worst_ftf_rho: float
    unfair_fraction: float
    preemptions: int
    lease_extension_share: float
    rounds: int
    allocations: int
    solver_seconds: float
    wall_s: float
