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


def test_per_job_type_overheads_replace_the_single_one() -> None:
    steps = int(default_throughputs().throughput(LM, 1, "v100") * 100)
    jobs = [JobSpec(0, LM, steps), JobSpec(1, "ResNet-18 (batch size 32)", 1000)]
    options = {"cluster": "2:0:0", "policy": "max_min_fairness", "overhead_on_first_start": True}
    plain = simulate(jobs, **options)
    by_type = simulate(
        jobs, **options, preemption_overhead_s=1.0, overhead_by_job_type={LM: 9.0}
    )
    # Each job has a GPU of its own: LM pays its own 9 s once, ResNet-18 the default 1 s.
    assert by_type.records[0].jct_s == pytest.approx(plain.records[0].jct_s + 9.0, abs=0.1)
    assert by_type.records[1].jct_s == pytest.approx(plain.records[1].jct_s + 1.0, abs=0.1)


def test_a_negative_per_type_overhead_is_an_input_error() -> None:
    from shock.core.errors import InputError

    with pytest.raises(InputError, match="overhead"):
        simulate([JobSpec(0, LM, 10)], cluster="1:0:0", overhead_by_job_type={LM: -1.0})


def test_a_model_family_overhead_covers_its_job_types() -> None:
    steps = int(default_throughputs().throughput(LM, 1, "v100") * 100)
    jobs = [JobSpec(0, LM, steps), JobSpec(1, "ResNet-18 (batch size 32)", 1000)]
    options = {"cluster": "2:0:0", "policy": "max_min_fairness", "overhead_on_first_start": True}
    plain = simulate(jobs, **options)
    family = LM.split(" ", 1)[0]
    by_family = simulate(
        jobs, **options, preemption_overhead_s=1.0, overhead_by_job_type={family: 9.0}
    )
    assert by_family.records[0].jct_s == pytest.approx(plain.records[0].jct_s + 9.0, abs=0.1)
    assert by_family.records[1].jct_s == pytest.approx(plain.records[1].jct_s + 1.0, abs=0.1)


def test_a_restart_longer_than_a_round_goes_on_while_the_job_keeps_its_gpus() -> None:
    # Sia's simulator stops a job for its whole restore time (imagenet: 250 s, rounds of 60 s).
    steps = int(default_throughputs().throughput(LM, 1, "v100") * 1000)
    jobs = [JobSpec(0, LM, steps)]
    options = {"cluster": "1:0:0", "policy": "max_min_fairness", "overhead_on_first_start": True}
    plain = simulate(jobs, **options)
    long_restart = simulate(jobs, **options, preemption_overhead_s=900.0)  # 2.5 rounds of 360 s
    assert long_restart.records[0].jct_s == pytest.approx(plain.records[0].jct_s + 900.0, abs=0.1)
