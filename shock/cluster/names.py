"""How a job's GPUs are named, the same in `shock jobs`, `shock watch`, the log and the
dashboard: the worker's id (unique, unlike host names) and its local GPU indices, e.g.
`worker-1 GPUs 0,1` or, for a gang across workers, `worker-1 GPU 0 + worker-2 GPU 0`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def worker_gpus(worker_id: str, gpus: Sequence[int]) -> str:
    label = "GPU" if len(gpus) == 1 else "GPUs"
    return f"{worker_id} {label} {','.join(str(gpu) for gpu in gpus)}"


def placement_text(parts: Iterable[tuple[str, Sequence[int]]]) -> str:
    """Every (worker, its GPUs) a job holds; consecutive parts on one worker are merged."""
    merged: list[tuple[str, list[int]]] = []
    for worker_id, gpus in parts:
        if merged and merged[-1][0] == worker_id:
            merged[-1][1].extend(gpus)
        else:
            merged.append((worker_id, list(gpus)))
    return " + ".join(worker_gpus(worker_id, gpus) for worker_id, gpus in merged)
