"""What Pollux's artifact fixes per application, and the one worker type its policies use."""

from __future__ import annotations

import numpy as np

from shock.api import InputError, PolicyInput

# Pollux's simulator runs NCF on one GPU at a fixed total batch size, whatever the policy.
MAX_GPUS = {"ncf": 1}
FIXED_BATCH = {"ncf": 32768}


def worker_column(problem: PolicyInput, wanted: str, policy: str) -> int:
    """The one worker type a policy of Pollux's artifact schedules: the one named, else the
    one with the most GPUs (the others stay idle)."""
    if wanted:
        if wanted not in problem.worker_types:
            raise InputError(
                f"policy '{policy}': worker type '{wanted}' is not in the cluster "
                f"({', '.join(problem.worker_types)})",
                field="--policy-option worker-type",
            )
        return problem.worker_types.index(wanted)
    return int(np.argmax(problem.capacity))
