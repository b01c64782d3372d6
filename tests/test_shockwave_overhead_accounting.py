"""How `--preset shockwave` counts a round in which a job pays Shockwave's 20 s overhead, as
Shockwave's simulator does: the job does a whole round's steps scaled by (t - 20) / t (t the
time those steps take), the round lasts t, and the round mechanism's priorities count only
t - 20 as time the job received. Other presets count the whole round as received."""

from __future__ import annotations

import pytest
from test_simulator import rate

from shock.core.events import RoundEnded
from shock.core.hookspecs import hookimpl
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.trace import Trace
from shock.engine.engine import Engine
from shock.engine.runner import RunOptions, build_request
from shock.plugins.backends.simulator import SimulatedExecutor

# A job type whose whole-round steps scaled down differ from its steps in 100 s.
SLOW = "Recommendation (batch size 8192)"
ROUND = 120.0
OVERHEAD = 20.0


class Counters:
    """After each round: every active job's steps done and time received (one worker type)."""

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.rounds: list[tuple[float, dict[int, tuple[float, float]]]] = []

    @hookimpl
    def round_ended(self, event: RoundEnded) -> None:
        assert self.engine is not None and self.engine.mechanism is not None
        active = self.engine.mechanism.active
        self.rounds.append(
            (event.time, {j: (s.steps_done, s.time_so_far[0]) for j, s in active.items()})
        )


def two_jobs_on_one_gpu(preset: str, **options: object) -> Counters:
    """Two long jobs from t = 0 on one GPU. Under the shockwave preset job 0 runs the (free)
    first round, job 1 the second, in which it pays the overhead (it did not run in the
    previous round)."""
    registry = default_registry()
    counters = Counters()
    registry.manager.register(counters)
    steps = int(rate(SLOW) * 5000)
    jobs = (JobSpec(0, SLOW, steps), JobSpec(1, SLOW, steps))
    run_options = RunOptions(
        policy="max_min_fairness",
        preset=preset,
        cluster="1:0:0",
        preemption_overhead_s=OVERHEAD,
        **options,  # type: ignore[arg-type]
    )
    request = build_request(run_options, registry, trace=Trace(jobs, "two jobs"))
    engine = Engine(request, SimulatedExecutor(), "simulator")
    counters.engine = engine
    engine.run()
    return counters


def whole_round() -> tuple[int, float]:
    """Steps a whole round holds for SLOW, and the seconds they take."""
    steps = int(rate(SLOW) * ROUND)
    return steps, steps / rate(SLOW)


def test_a_charged_round_does_a_whole_rounds_steps_scaled_down() -> None:
    counters = two_jobs_on_one_gpu("shockwave")
    (first_end, _), (second_end, after) = counters.rounds[:2]
    steps, seconds = whole_round()
    assert after[1][0] == int(steps * (seconds - OVERHEAD) / seconds)
    # The round lasts as long as the whole round's steps would have taken.
    assert second_end - first_end == pytest.approx(seconds)
    # Not what 100 s at the job's rate would give (the job type is chosen so).
    assert after[1][0] != int(rate(SLOW) * (ROUND - OVERHEAD))


def test_shockwave_priorities_count_a_charged_round_less_its_overhead() -> None:
    counters = two_jobs_on_one_gpu("shockwave")
    (_, before), (_, after) = counters.rounds[:2]
    _, seconds = whole_round()
    assert after[1][1] - before[1][1] == pytest.approx(seconds - OVERHEAD)
    # Job 0 ran the free first round: all its time counted.
    assert before[0][1] - ROUND / 2 == pytest.approx(seconds)


def test_other_presets_count_the_whole_round_as_received() -> None:
    # shock's default preset, every start charged: the job trains for the rest of its
    # 360 s round, and the whole round counts as time received.
    counters = two_jobs_on_one_gpu("default", overhead_on_first_start=True)
    end, after = counters.rounds[0]
    ran = [job for job, (steps, _) in after.items() if steps > 0]
    assert len(ran) == 1
    steps, received = after[ran[0]]
    assert steps == int(rate(SLOW) * (360.0 - OVERHEAD))
    assert received - 360.0 / 2 == pytest.approx(end)
