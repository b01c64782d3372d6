"""Shockwave's baselines as its simulator states them (`--preset shockwave`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.runner import RunOptions, build_request, bundled_trace_path
from shock.core.solver import SolverSpec
from shock.plugins.policies.max_sum_throughput import MaxSumThroughput
from tests.instances import generated_input

SOLVER = SolverSpec(name="highs")


def two_models_on_one_gpu() -> object:
    """Two single-GPU jobs on one V100: the first steps 10x faster than the second."""
    problem = generated_input(2, (0, 0, 1), seed=3, multi_gpu=False)
    jobs = tuple(dataclasses.replace(job, scale_factor=1) for job in problem.jobs)
    throughputs = np.array([[0.0, 0.0, 10.0], [0.0, 0.0, 1.0]])
    return dataclasses.replace(problem, jobs=jobs, throughputs=throughputs)


def test_raw_throughput_gives_the_gpu_to_the_fastest_stepping_job() -> None:
    problem = two_models_on_one_gpu()
    raw = MaxSumThroughput().with_options({"raw_throughput": "true"}).allocate(problem, SOLVER)
    assert raw.fractions[0, 2] == pytest.approx(1.0, abs=1e-6)
    assert raw.fractions[1, 2] == pytest.approx(0.0, abs=1e-6)
    assert raw.objective == pytest.approx(10.0, rel=1e-6)


def test_normalised_throughput_weighs_both_jobs_alike() -> None:
    # Each job counts its share of its own best rate, so neither is worth more: the GPU's
    # time is split, where raw steps/s would give it all to the first job.
    fractions = MaxSumThroughput().allocate(two_models_on_one_gpu(), SOLVER).fractions
    assert fractions[:, 2].sum() == pytest.approx(1.0, abs=1e-6)
    assert fractions[1, 2] > 0.1


def test_shockwave_preset_sums_raw_steps_and_others_do_not() -> None:
    registry = default_registry()
    trace = str(bundled_trace_path("shockwave_120_multigpu_dynamic.trace"))
    for preset, raw in (("shockwave", True), ("default", False), ("gavel", False)):
        request = build_request(
            RunOptions(policy="max_sum_throughput_perf", preset=preset, trace=trace,
                       cluster="32:0:0"),
            registry,
        )
        assert request.policy.options.raw_throughput is raw


def test_bad_raw_throughput_value_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="raw_throughput"):
        MaxSumThroughput().with_options({"raw_throughput": "maybe"})
