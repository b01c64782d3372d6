"""The constraints every time-fraction policy shares, and cleaning their solutions.

x[j, w] is the fraction of time job j spends on worker type w:
    x >= 0,   sum_w x[j, w] <= 1   (a job runs on one type at a time),
    sum_j sf_j x[j, w] <= capacity_w   (gangs of sf_j GPUs fit in each type).
Their matrix rows are `rate_lp.base_triplets`; x <= 1 is implied by the row constraint and
left out (an explicit bound would move interior solutions).
"""

from __future__ import annotations

import numpy as np


def clean_fractions(values: np.ndarray) -> np.ndarray:
    """Clip solver noise: fractions in [0, 1] and each row summing to at most 1."""
    # (np.clip's wrapper costs more than the two ufuncs; they differ only on -0.0, which
    # the next line makes 0.0 either way.)
    values = np.minimum(np.maximum(values, 0.0), 1.0)
    values[values < 1e-9] = 0.0
    sums = values.sum(axis=1)
    if len(sums) and sums.max() > 1.0:
        over = sums > 1.0
        values[over] /= sums[over, None]
    return values
