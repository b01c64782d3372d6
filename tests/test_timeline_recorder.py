"""The timeline recorder fed round by round by hand: segments merge across consecutive
rounds on the same worker type and GPU count, split on any change or pause, end where a job
finished early, and a timeline taken mid-run stays as it was while recording goes on."""

from __future__ import annotations

from shock.core.executor import UnitProgress
from shock.core.model import Cluster, JobSpec
from shock.core.timeline import Segment
from shock.engine.timeline_recorder import TimelineRecorder
from shock.engine.units import Assignment, JobState, PairState

WORKER_TYPES = ("k80", "v100")


def job(job_id: int) -> JobState:
    spec = JobSpec(job_id, "ResNet-18 (batch size 32)", 1000, arrival_time=0.0)
    state = JobState(spec, job_id, 1, 1000, [1.0, 1.0], [1.0, 1.0])
    state.members = (state,)
    return state


def alone(state: JobState, column: int, gpus: int) -> Assignment:
    return Assignment(state, column, WORKER_TYPES[column], tuple(range(gpus)), (1.0,), False)


def ran(recorder: TimelineRecorder, start: float, units: list[tuple[Assignment, float]]) -> None:
    """A 100 s round at `start`; each unit's job stops at the given offset into it."""
    recorder.round_planned(start, active_jobs=4, solver_total_s=0.0)
    progress = [
        UnitProgress((1.0,) * len(a.unit.members), (start + stop,) * len(a.unit.members), stop)
        for a, stop in units
    ]
    recorder.round_ran([a for a, _ in units], progress, WORKER_TYPES)


def segments(recorder: TimelineRecorder) -> dict[int, list[Segment]]:
    return {j.job_id: list(j.segments) for j in recorder.timeline().jobs}


def test_segments_merge_split_and_stay_as_taken() -> None:
    recorder = TimelineRecorder(Cluster({"k80": 4, "v100": 4}))
    a, b, c = job(1), job(2), job(3)
    for state in (a, b, c):
        recorder.job_admitted(state.spec)
    ran(recorder, 0.0, [(alone(a, 0, 1), 100.0), (alone(b, 1, 2), 100.0)])
    ran(recorder, 100.0, [(alone(a, 0, 1), 100.0), (alone(b, 1, 1), 100.0)])
    taken = recorder.timeline()
    before = {j.job_id: list(j.segments) for j in taken.jobs}
    # a pauses a round then runs paired with c; b moves to the other worker type.
    ran(recorder, 200.0, [(alone(b, 0, 1), 100.0)])
    pair = PairState((1, 3), (a, c), 1, [(1.0, 1.0)] * 2, [1.0, 1.0], [0.0] * 2, [0.0] * 2)
    pair_assignment = Assignment(pair, 1, "v100", (0, 1), (1.0, 1.0), False)
    ran(recorder, 300.0, [(alone(b, 0, 1), 40.0), (pair_assignment, 100.0)])
    assert before == {
        1: [Segment(0.0, 200.0, "k80", 1)],
        2: [Segment(0.0, 100.0, "v100", 2), Segment(100.0, 200.0, "v100", 1)],
        3: [],
    }
    assert {j.job_id: list(j.segments) for j in taken.jobs} == before
    assert segments(recorder) == {
        1: [Segment(0.0, 200.0, "k80", 1), Segment(300.0, 400.0, "v100", 2)],
        2: [
            Segment(0.0, 100.0, "v100", 2),
            Segment(100.0, 200.0, "v100", 1),
            # Merged over two rounds; it finished 40 s into the second.
            Segment(200.0, 340.0, "k80", 1),
        ],
        3: [Segment(300.0, 400.0, "v100", 2)],
    }
    final = recorder.timeline()
    assert final.rounds.busy_gpus == ((1, 2), (1, 1), (1, 0), (1, 2))
    assert final.rounds.running == (2, 2, 1, 3)
    assert final.rounds.queued == (2, 2, 3, 1)


def test_a_job_first_seen_running_is_recorded_from_then_on() -> None:
    """After a restore, jobs admitted before it run without having been admitted here."""
    recorder = TimelineRecorder(Cluster({"k80": 4, "v100": 4}))
    restored = job(7)
    ran(recorder, 0.0, [(alone(restored, 1, 4), 100.0)])
    ran(recorder, 100.0, [(alone(restored, 1, 4), 60.0)])
    (only,) = recorder.timeline().jobs
    assert (only.job_id, list(only.segments)) == (7, [Segment(0.0, 160.0, "v100", 4)])
    assert only.segments[-1] == only.segments[0] == Segment(0.0, 160.0, "v100", 4)


def test_jobs_numbered_far_apart_keep_their_own_segments() -> None:
    """Ids a table by id would not fit (a service's, say) are looked up one by one."""
    recorder = TimelineRecorder(Cluster({"k80": 4, "v100": 4}))
    small, huge = job(3), job(10**12)
    recorder.job_admitted(small.spec)
    recorder.job_admitted(huge.spec)
    ran(recorder, 0.0, [(alone(huge, 0, 1), 100.0), (alone(small, 1, 1), 100.0)])
    ran(recorder, 100.0, [(alone(small, 1, 1), 100.0), (alone(huge, 0, 2), 100.0)])
    late = job(10**12 + 1)  # running, never admitted here
    ran(recorder, 200.0, [(alone(late, 1, 1), 50.0), (alone(huge, 0, 2), 100.0)])
    assert segments(recorder) == {
        3: [Segment(0.0, 200.0, "v100", 1)],
        10**12: [Segment(0.0, 100.0, "k80", 1), Segment(100.0, 300.0, "k80", 2)],
        10**12 + 1: [Segment(200.0, 250.0, "v100", 1)],
    }
