"""Pollux's workload CSVs: read as they are, format detected, bad lines named."""

from __future__ import annotations

import importlib.util
from importlib import resources
from pathlib import Path

import pytest

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.trace import read_trace, write_trace

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("scipy") is None, reason="the goodput model needs scipy"
)

WORKLOAD_6 = Path(
    str(resources.files("shock") / "data" / "pollux" / "workloads" / "workload-6.csv")
)
HEADER = "name,time,application,num_replicas,batch_size\n"


def test_workload_6_reads_with_its_format_detected() -> None:
    trace = read_trace(WORKLOAD_6, default_registry())
    assert trace.format == "pollux"
    assert len(trace.jobs) == 160
    first = trace.jobs[0]
    # Its first line: cifar10-0,53,cifar10,6,2048
    assert (first.job_id, first.job_type, first.scale_factor, first.arrival_time) == (
        0,
        "cifar10 (batch size 2048)",
        6,
        53.0,
    )
    assert first.source_line == 2
    # cifar10's validation run at 2048 reaches its 100th epoch after as many steps.
    from shock.goodput.applications import application

    run = application("cifar10").validation[2048]
    assert first.total_steps == run[99].iteration * 2048  # samples: steps x batch size
    assert [j.job_id for j in trace.jobs] == list(range(160))


def test_round_trip(tmp_path: Path) -> None:
    registry = default_registry()
    trace = read_trace(WORKLOAD_6, registry)
    out = tmp_path / "again.csv"
    write_trace(trace.jobs, out, registry, "pollux")
    again = read_trace(out, registry)
    assert [(j.job_type, j.scale_factor, j.arrival_time, j.total_steps) for j in again.jobs] == [
        (j.job_type, j.scale_factor, j.arrival_time, j.total_steps) for j in trace.jobs
    ]


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        ("a,10,resnet,1,128", "application", "unknown application 'resnet'"),
        ("a,10,cifar10,0,128", "num_replicas", "must be >= 1"),
        ("a,ten,cifar10,1,128", "time", "expected a number"),
        ("a,10,cifar10,1,big", "batch_size", "expected an integer"),
        ("a,10,cifar10,1", "batch_size", "expected 5 comma-separated columns"),
    ],
)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, line: str, field: str, words: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + "ok,0,bert,1,12\n" + line + "\n")
    with pytest.raises(InputError) as raised:
        read_trace(path, default_registry())
    error = raised.value
    assert (error.path, error.line, error.field) == (str(path), 3, field)
    assert words in str(error)


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text(HEADER + "x,0,bert,1,12\nx,5,ncf,1,256\n")
    with pytest.raises(InputError, match="name 'x' already used on line 2") as raised:
        read_trace(path, default_registry())
    assert raised.value.line == 3


def test_a_header_only_trace_has_no_jobs(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text(HEADER)
    with pytest.raises(InputError, match="no jobs"):
        read_trace(path, default_registry(), "pollux")


def test_default_table_gives_every_job_a_rate() -> None:
    registry = default_registry()
    trace = read_trace(WORKLOAD_6, registry)
    fmt = registry.get("trace format", "pollux")
    assert fmt.default_cluster(trace) == "pollux-64"
    table = fmt.default_throughputs(trace, ("t4",), None)
    for job in trace.jobs:
        rate = table.throughput(job.job_type, job.scale_factor, "t4")
        assert job.batch_size is not None
        assert 0 < rate / job.batch_size < 1000  # samples/s: steps/s x batch size
