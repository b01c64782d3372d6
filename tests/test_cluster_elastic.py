"""Pollux workloads on the real cluster: a Pollux application's job runs as the built-in
stand-in doing the same kind of task (`bert` as the small Transformer), training the work its
trace counts in samples as steps of its batch size."""

from __future__ import annotations

from pathlib import Path

from shock.cluster.runtime.state import TrackedJob, launch_steps, samples_per_step
from shock.core.model import JobSpec
from shock.traces.pollux import read_pollux_csv
from shock.workloads.families import parse_job_type

# bert at batch size 256: 480 steps of the stand-in.
TRACE = """name,time,application,num_replicas,batch_size
bert-0,0,bert,1,256
"""
STEPS = 480


def test_a_pollux_job_trains_its_samples_as_steps_of_its_stand_in(tmp_path: Path) -> None:
    trace = tmp_path / "workload.csv"
    trace.write_text(TRACE)
    (spec,) = read_pollux_csv(trace).jobs
    assert parse_job_type(spec.job_type) == ("Transformer", 256)
    assert samples_per_step(spec) == 256
    assert spec.total_steps == STEPS * 256 and launch_steps(spec) == STEPS
    assert TrackedJob(spec).target_steps == STEPS
    # A Gavel trace's job counts steps.
    gavel = JobSpec(0, "ResNet-18 (batch size 32)", 1000)
    assert samples_per_step(gavel) == 1 and launch_steps(gavel) == 1000
