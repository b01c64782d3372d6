"""Segments merged in batches of rounds are exactly those merged round by round: checked
against a plain per-job reference on random runs, for batches of every size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shock.engine import timeline_segments
from shock.engine.timeline_segments import SegmentBuilder

# One job's run in a round: (job, worker-type column, GPUs, exec s, how it stopped).
Run = tuple[int, int, int, float, int]
ROUND_S = 100.0


def reference(rounds: list[list[Run]]) -> dict[int, list[tuple[int, float, int, int]]]:
    """Each job's segments (first round, end, column, GPUs), merged round by round."""
    done: dict[int, list[tuple[int, float, int, int]]] = {}
    open_: dict[int, list[float]] = {}  # job -> [first, end, column, gpus, last round]
    for index, runs in enumerate(rounds):
        start = index * ROUND_S
        for job, column, gpus, exec_s, stop in runs:
            end = _end(start, exec_s, stop)
            segment = open_.get(job)
            if segment and segment[4] == index - 1 and segment[2:4] == [column, gpus]:
                segment[1], segment[4] = end, index
                continue
            if segment:
                done.setdefault(job, []).append(_closed(segment))
            open_[job] = [index, end, column, gpus, index]
    for job, segment in open_.items():
        done.setdefault(job, []).append(_closed(segment))
    return done


def _end(start: float, exec_s: float, stop: int) -> float:
    """Where a job stopped: at its exec time, a finish inside it, or a stray stop time."""
    held = start + exec_s
    stopped = (held, start + exec_s / 2, held + 5.0, start - 1.0)[stop]
    return held if stopped > held or stopped < start else stopped


def _closed(segment: list[float]) -> tuple[int, float, int, int]:
    return int(segment[0]), segment[1], int(segment[2]), int(segment[3])


def built(rounds: list[list[Run]], jobs: int) -> dict[int, list[tuple[int, float, int, int]]]:
    builder = SegmentBuilder()
    for index, runs in enumerate(rounds):
        start = index * ROUND_S
        exec_s = np.array([r[3] for r in runs], dtype=np.float64)
        stopped = np.array(
            [(start + r[3], start + r[3] / 2, start + r[3] + 5.0, start - 1.0)[r[4]] for r in runs],
            dtype=np.float64,
        )
        builder.ran(
            index,
            start,
            np.array([r[0] for r in runs], dtype=np.intp),
            exec_s,
            stopped,
            np.array([r[1] for r in runs], dtype=np.intp),
            np.array([r[2] for r in runs], dtype=np.intp),
            jobs,
        )
    job, first, end, column, gpus = builder.columns(jobs)
    segments: dict[int, list[tuple[int, float, int, int]]] = {}
    for k in np.argsort(job, kind="stable").tolist():
        segments.setdefault(int(job[k]), []).append(
            (int(first[k]), float(end[k]), int(column[k]), int(gpus[k]))
        )
    return segments


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[list[Run]], int]:
    jobs = draw(st.integers(1, 12))
    rounds = []
    for _ in range(draw(st.integers(0, 30))):
        ran = draw(st.lists(st.integers(0, jobs - 1), unique=True, max_size=jobs))
        rounds.append(
            [
                (
                    job,
                    draw(st.integers(0, 2)),
                    draw(st.integers(1, 2)),
                    draw(st.sampled_from([ROUND_S, 40.0, 0.0])),
                    draw(st.integers(0, 3)),
                )
                for job in ran
            ]
        )
    return rounds, jobs


@pytest.mark.parametrize(("batch_rounds", "batch_entries"), [(1, 1), (3, 10), (256, 1 << 14)])
@settings(max_examples=60, deadline=None)
@given(run=runs())
def test_batched_segments_equal_round_by_round(
    run: tuple[list[list[Run]], int],
    batch_rounds: int,
    batch_entries: int,
) -> None:
    rounds, jobs = run
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timeline_segments, "BATCH_ROUNDS", batch_rounds)
        patch.setattr(timeline_segments, "BATCH_ENTRIES", batch_entries)
        assert built(rounds, jobs) == reference(rounds)


def test_segments_read_mid_run_stay_as_read_and_recording_goes_on() -> None:
    builder = SegmentBuilder()
    one = np.array([0], dtype=np.intp)
    for index in range(3):
        column = np.array([index // 2], dtype=np.intp)
        builder.ran(index, index * ROUND_S, one, np.array([ROUND_S]), np.array([0.0]), column,
                    np.array([1], dtype=np.intp), 1)  # fmt: skip
        if index == 1:
            middle = [column.copy() for column in builder.columns(1)]
    # Rounds 0 and 1 on column 0 merged; round 2 on column 1 closes that segment.
    assert [c.tolist() for c in middle] == [[0], [0], [200.0], [0], [1]]
    assert [c.tolist() for c in builder.columns(1)] == [[0, 0], [0, 2], [200.0, 300.0], [0, 1],
                                                       [1, 1]]  # fmt: skip
