"""The results document on disk: version 2 (JSON and a timeline side-car of arrays), read
back with the same information as the inline version 1, which is still read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_simulator import simulate
from test_timeline import queued_jobs

from shock.core.errors import InputError
from shock.core.results import RunResult, document_text, sidecar_path
from shock.core.timeline import Timeline
from shock.core.timeline_columns import ARRAY_NAMES, timeline_arrays
from shock.results.document import load_result, version_1_document
from shock.results.runs import load_run


@pytest.fixture(scope="module")
def result() -> RunResult:
    return simulate(queued_jobs(9), cluster="1:1:1")


def assert_same_timeline(read: Timeline, kept: Timeline) -> None:
    assert read.worker_types == kept.worker_types
    assert read.capacity == kept.capacity
    assert read.rounds == kept.rounds
    assert len(read.jobs) == len(kept.jobs)
    for a, b in zip(read.jobs, kept.jobs, strict=True):
        assert (a.job_id, a.job_type, a.scale_factor) == (b.job_id, b.job_type, b.scale_factor)
        assert list(a.segments) == list(b.segments)
        assert a.batch_sizes == b.batch_sizes


def test_the_timeline_goes_to_a_side_car_and_comes_back_whole(
    result: RunResult, tmp_path: Path
) -> None:
    path = tmp_path / "run.json"
    result.write_json(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json", "run.timeline.npz"]
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == 2
    assert raw["timeline"] == {"file": "run.timeline.npz", "format": "npz"}
    assert result.timeline is not None
    assert_same_timeline(load_result(path).timeline, result.timeline)  # type: ignore[arg-type]


def test_both_layouts_hold_the_same_content(result: RunResult, tmp_path: Path) -> None:
    new = tmp_path / "new.json"
    result.write_json(new)
    old = tmp_path / "old.json"
    old.write_text(document_text(result.to_document()))  # what shock wrote before
    inline = json.loads(json.dumps(result.to_document()))
    assert version_1_document(new) == inline
    assert version_1_document(old) == inline
    a, b = load_run(new), load_run(old)
    assert a.metrics == b.metrics
    assert np.array_equal(a.jct_s, b.jct_s)
    assert a.timeline is not None and b.timeline is not None
    assert np.array_equal(a.timeline.busy_gpus, b.timeline.busy_gpus)
    # The inline layout keeps milliseconds; the side-car full precision.
    assert np.allclose(a.timeline.time_s, b.timeline.time_s, atol=5e-4, rtol=0)
    for x, y in zip(a.timeline.jobs, b.timeline.jobs, strict=True):
        assert [s[2:] for s in x.segments] == [s[2:] for s in y.segments]
        assert np.allclose([s[:2] for s in x.segments], [s[:2] for s in y.segments], atol=5e-4)


def test_a_moved_document_without_its_side_car_is_a_clear_error(
    result: RunResult, tmp_path: Path
) -> None:
    path = tmp_path / "run.json"
    result.write_json(path)
    sidecar_path(path).unlink()
    with pytest.raises(InputError, match=r"run\.timeline\.npz is missing") as raised:
        load_result(path)
    assert str(path) in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_malformed_side_car_names_itself(result: RunResult, tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    result.write_json(path)
    sidecar = sidecar_path(path)
    with np.load(sidecar) as arrays:
        kept = {name: arrays[name] for name in arrays.files if name != "segment_gpus"}
    np.savez(sidecar, **kept)
    with pytest.raises(InputError, match=r"missing array.*segment_gpus") as raised:
        load_result(path)
    assert str(sidecar) in str(raised.value)
    sidecar.write_text("not arrays")
    with pytest.raises(InputError, match="not a timeline side-car"):
        load_result(path)


def test_a_newer_schema_is_refused(result: RunResult, tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**result.to_document(), "schema_version": 99}))
    with pytest.raises(InputError, match="schema version 99 is newer"):
        load_result(path)


def test_a_document_without_timeline_writes_no_side_car(tmp_path: Path) -> None:
    from dataclasses import replace

    bare = replace(simulate(queued_jobs(2), cluster="1:1:1"), timeline=None)
    path = tmp_path / "bare.json"
    bare.write_json(path)
    assert [p.name for p in tmp_path.iterdir()] == ["bare.json"]
    assert load_result(path).timeline is None
    assert version_1_document(path) == json.loads(json.dumps(bare.to_document()))


def test_the_side_car_holds_exactly_the_documented_arrays(
    result: RunResult, tmp_path: Path
) -> None:
    path = tmp_path / "run.json"
    result.write_json(path)
    with np.load(sidecar_path(path), allow_pickle=False) as arrays:
        assert arrays.files == list(ARRAY_NAMES)
        assert int(arrays["job_segments"].sum()) == len(arrays["segment_start_s"])


def test_a_timeline_of_plain_segments_writes_the_same_arrays(
    result: RunResult, tmp_path: Path
) -> None:
    """A timeline read from the inline layout (segments as tuples, not the run's columns)
    gives the arrays a run's own gives, up to the inline layout's milliseconds."""
    old = tmp_path / "old.json"
    old.write_text(document_text(result.to_document()))
    plain = load_result(old).timeline
    assert plain is not None and result.timeline is not None
    ours, theirs = timeline_arrays(result.timeline), timeline_arrays(plain)
    assert list(ours) == list(theirs) == list(ARRAY_NAMES)
    for name in ARRAY_NAMES:
        if ours[name].dtype.kind == "f":
            assert np.allclose(ours[name], theirs[name], atol=5e-4, rtol=0), name
        else:
            assert np.array_equal(ours[name], theirs[name]), name
