"""Synergy CSV traces, the Synergy workload generator and derived throughputs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.trace import read_trace, write_trace
from shock.engine.runner import RunOptions, run
from shock.resources.profiles import synergy_profiles
from shock.resources.throughputs import synergy_throughput_table
from shock.traces.synergy_generator import SynergyWorkload, generate_synergy_jobs

HEADER = "job_id,model_name,arrival_time_s,total_iterations,gpu_demand\n"


def test_round_trip_and_detection(tmp_path: Path) -> None:
    jobs = generate_synergy_jobs(SynergyWorkload(20, jobs_per_hour=9.0, seed=3))
    path = tmp_path / "t.csv"
    registry = default_registry()
    write_trace(jobs, path, registry, "synergy")
    trace = read_trace(path, registry)  # detected from the header
    assert trace.format == "synergy"
    assert [(j.job_id, j.job_type, j.total_steps, j.scale_factor) for j in trace.jobs] == [
        (j.job_id, j.job_type, j.total_steps, j.scale_factor) for j in jobs
    ]
    assert [j.arrival_time for j in trace.jobs] == pytest.approx([j.arrival_time for j in jobs])


@pytest.mark.parametrize(
    ("body", "line", "field", "words"),
    [
        ("0,res18,0,100,1\n1,gnmt,5,x,1\n", 3, "total_iterations", "integer"),
        ("0,res18,-1,100,1\n", 2, "arrival_time_s", ">= 0"),
        ("0,res18,0,100,0\n", 2, "gpu_demand", ">= 1"),
        ("0,res18,0,100\n", 2, "gpu_demand", "5 comma-separated"),
        ("0,res18,0,100,1\n0,gnmt,1,100,1\n", 3, "job_id", "already used on line 2"),
        ("0,,0,100,1\n", 2, "model_name", "empty"),
    ],
)
def test_bad_lines_name_line_and_field(
    tmp_path: Path, body: str, line: int, field: str, words: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + body)
    with pytest.raises(InputError) as caught:
        read_trace(path, default_registry(), "synergy")
    assert (caught.value.line, caught.value.field) == (line, field)
    assert words in caught.value.reason


def test_wrong_header(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("id,model\n0,res18\n")
    with pytest.raises(InputError, match="header"):
        read_trace(path, default_registry(), "synergy")


def test_generator_follows_synergys_workload_model() -> None:
    jobs = generate_synergy_jobs(SynergyWorkload(3000, jobs_per_hour=9.0, seed=1))
    gpus = Counter(j.scale_factor for j in jobs)
    for demand, share in ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05)):
        assert gpus[demand] / len(jobs) == pytest.approx(share, abs=0.03)
    classes = Counter(synergy_profiles()[j.job_type].job_class for j in jobs)
    for job_class, share in (("image", 0.2), ("language", 0.7), ("speech", 0.1)):
        assert classes[job_class] / len(jobs) == pytest.approx(share, abs=0.03)
    hours = jobs[-1].arrival_time / 3600
    assert (len(jobs) - 1) / hours == pytest.approx(9.0, rel=0.1)
    # Same seed, same trace.
    again = generate_synergy_jobs(SynergyWorkload(3000, jobs_per_hour=9.0, seed=1))
    assert again == jobs
    single = generate_synergy_jobs(SynergyWorkload(50, multi_gpu=False))
    assert {j.scale_factor for j in single} == {1}


def test_classes_are_balanced_and_models_take_turns_as_in_synergy() -> None:
    jobs = generate_synergy_jobs(SynergyWorkload(100, class_split=(20, 70, 10), seed=4))
    profiles = synergy_profiles()
    classes = Counter(profiles[j.job_type].job_class for j in jobs)
    assert classes == {"image": 20, "language": 70, "speech": 10}
    image = [j.job_type for j in jobs if profiles[j.job_type].job_class == "image"]
    assert image[:6] == ["alexnet", "res18", "res50", "mobilenet", "shufflenet", "alexnet"]
    assert all(j.arrival_time == int(j.arrival_time) for j in jobs)  # whole seconds
    drawn = generate_synergy_jobs(SynergyWorkload(100, seed=4, balanced_classes=False))
    assert [j.job_type for j in drawn] != [j.job_type for j in jobs]


def test_derived_throughput_is_one_iteration_per_iter_time() -> None:
    jobs = generate_synergy_jobs(SynergyWorkload(30, seed=2))
    table = synergy_throughput_table(jobs, ["v100"])
    for job in jobs:
        rate = table.throughput(job.job_type, job.scale_factor, "v100")
        assert rate == pytest.approx(1 / synergy_profiles()[job.job_type].iter_time_s)


def test_unknown_model_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "0,res18,0,100,1\n1,yolo,0,100,1\n")
    with pytest.raises(InputError) as caught:
        run(RunOptions(policy="fifo", trace=str(path), cluster="synergy-128"))
    assert caught.value.line == 3
    assert caught.value.field == "job_type"


def test_gavel_job_types_in_a_synergy_csv_use_gavels_throughputs(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "0,ResNet-18 (batch size 32),0,1000,1\n1,res18,0,100,1\n")
    result = run(RunOptions(policy="fifo", trace=str(path), cluster="synergy-128"))
    assert result.unfinished_jobs == 0
