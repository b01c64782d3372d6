"""Results documents for the figure and report tests: a real run's document, with a timeline
built to the agreed schema (docs: the results document's `timeline` key)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from shock.core.results import RunResult

WORKER_TYPES = ["k80", "p100", "v100"]
CAPACITY = [4, 2, 2]


def make_document(
    policy: str,
    jcts: list[float],
    rhos: list[float | None],
    *,
    metrics: dict[str, float] | None = None,
    rounds: int = 0,
    round_s: float = 360.0,
    seed: int = 0,
) -> dict[str, object]:
    """A document with the given per-job results; with `rounds`, a timeline too: each job runs
    in two segments on different worker types, every third job changes its batch size."""
    rng = np.random.default_rng(seed)
    arrivals = [float(i * 100) for i in range(len(jcts))]
    jobs = [
        {"id": i, "arrival_s": a, "completion_s": a + j, "jct_s": j, "ftf_rho": r}
        for i, (a, j, r) in enumerate(zip(arrivals, jcts, rhos, strict=True))
    ]
    base = {
        "jobs": len(jcts),
        "avg_jct_s": float(np.mean(jcts)),
        "makespan_s": max(a + j for a, j in zip(arrivals, jcts, strict=True)),
        "worst_ftf_rho": max(r for r in rhos if r is not None),
        "unfair_fraction": sum(1 for r in rhos if r is not None and r > 1.05) / len(rhos),
        "utilization": 0.5,
        "preemptions": 3,
    }
    document: dict[str, object] = {
        "schema_version": 1,
        "policy": policy,
        "backend": "simulator",
        "solver": "highs",
        "trace": "test.trace",
        "cluster": "k80=4,p100=2,v100=2",
        "preset": "default",
        "placement": "consolidated",
        "adaptation_rules": "profile",
        "metrics": {**base, **(metrics or {})},
        "unfinished_jobs": 0,
        "jobs": jobs,
    }
    if rounds:
        busy = [[int(rng.integers(0, c + 1)) for c in CAPACITY] for _ in range(rounds)]
        document["timeline"] = {
            "worker_types": WORKER_TYPES,
            "capacity": CAPACITY,
            "rounds": {
                "time_s": [i * round_s for i in range(rounds)],
                "busy_gpus": busy,
                "queued": [int(rng.integers(0, 10)) for _ in range(rounds)],
                "running": [sum(row) for row in busy],
                "solve_s": [0.01 * (i + 1) if i % 3 == 0 else 0.0 for i in range(rounds)],
            },
            "jobs": [
                {
                    "id": job["id"],
                    "job_type": "ResNet-18 (batch size 64)",
                    "scale_factor": 1,
                    "segments": [
                        [job["arrival_s"], job["arrival_s"] + job["jct_s"] / 3, "v100", 1],
                        [job["arrival_s"] + job["jct_s"] / 2, job["completion_s"], "k80", 1],
                    ],
                    "batch_sizes": [[job["arrival_s"], 64]]
                    + ([[job["arrival_s"] + job["jct_s"] / 2, 128]] if job["id"] % 3 == 0 else []),
                }
                for job in jobs
            ],
        }
    return document


def write_document(path: Path, document: dict[str, object]) -> Path:
    path.write_text(json.dumps(document))
    return path


def comparable(result: RunResult) -> dict[str, object]:
    """A run's document without what depends on the machine (wall and solver seconds)."""
    document = result.to_document()
    metrics = dict(document["metrics"])  # type: ignore[call-overload]
    del metrics["wall_s"], metrics["solver_seconds"]
    document["metrics"] = metrics
    timeline = document["timeline"]
    assert isinstance(timeline, dict)
    timeline["rounds"].pop("solve_s")
    return document
