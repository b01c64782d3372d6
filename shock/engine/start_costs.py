"""Reading the start-cost side file `shock profile --start-costs` writes, for the simulator.

`{gpu_type: {job_type: {"launch_s": s, "checkpoint_s": s, "restore_s": s}}}`. A job that
(re)starts loses checkpoint + launch + restore seconds; the engine charges one cost per job
type, so a type's cost is its largest over the run's worker types the file has (all of the
file's types when it has none of them). The first launch is charged the same (a job's first
start has no checkpoint to write or read: that part, usually well under a second, is
overcharged).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from shock.core.errors import InputError

_FIELDS = ("launch_s", "checkpoint_s", "restore_s")


def load_start_costs(path: str | Path, worker_types: tuple[str, ...]) -> dict[str, float]:
    """Seconds lost per (re)start, by job type."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read start costs ({exc.strerror})", path=path) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from exc
    if not isinstance(raw, dict) or not raw:
        raise InputError("expected an object of GPU types", path=path)
    chosen = [w for w in raw if w in worker_types] or list(raw)
    costs: dict[str, float] = {}
    for gpu_type in chosen:
        jobs = raw[gpu_type]
        if not isinstance(jobs, dict):
            raise InputError("expected an object of job types", path=path, field=gpu_type)
        for job_type, entry in jobs.items():
            where = f"{gpu_type}.{job_type}"
            if not isinstance(entry, dict):
                raise InputError("expected an object of seconds", path=path, field=where)
            total = 0.0
            for name in _FIELDS:
                value = entry.get(name)
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise InputError(f"expected a number, got {value!r}", path=path,
                                     field=f"{where}.{name}")  # fmt: skip
                if not math.isfinite(value) or value < 0:
                    raise InputError(f"must be finite and >= 0, got {value}", path=path,
                                     field=f"{where}.{name}")  # fmt: skip
                total += float(value)
            costs[job_type] = max(costs.get(job_type, 0.0), total)
    return costs
