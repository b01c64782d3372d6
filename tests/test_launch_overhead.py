"""`overhead_on_first_start`: the simulator charges the start-up overhead on first starts too,
as real jobs pay it at every launch (the fidelity benchmark relies on it)."""

from __future__ import annotations

import pytest
from test_simulator import LM, simulate

from shock.core.model import JobSpec
from shock.core.throughputs import default_throughputs


def test_a_lone_job_pays_the_overhead_once_only_when_asked() -> None:
    steps = int(default_throughputs().throughput(LM, 1, "v100") * 1000)  # three rounds
    jobs = [JobSpec(0, LM, steps)]
    options = {"cluster": "1:0:0", "policy": "max_min_fairness", "preemption_overhead_s": 7.0}
    plain = simulate(jobs, **options)
    charged = simulate(jobs, **options, overhead_on_first_start=True)
    # It keeps its GPU after the first round: the overhead is paid exactly once.
    assert charged.records[0].jct_s == pytest.approx(plain.records[0].jct_s + 7.0, abs=0.1)
