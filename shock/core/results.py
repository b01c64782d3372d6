"""The results document written by `--json` (key names are a stable interface)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from shock.core.metrics import JobRecord, Metrics
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
