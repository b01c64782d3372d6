"""The results document written by `--json` (key names are a stable interface)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from shock.core.timeline import Timeline

SCHEMA_VERSION = 1


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
        document: dict[str, object] = {
            "schema_version": SCHEMA_VERSION,
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
        if self.timeline is not None:
            document["timeline"] = self.timeline.to_json()
        return document

    def write_json(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write then rename, so an interrupted run never leaves half a document.
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(document_text(self.to_document()))
        temporary.replace(path)


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
