"""The simulator's round, one executor call: each job alone progresses by its own rate, steps
left and overhead, whatever else runs in the round (a pair included)."""

from __future__ import annotations

import numpy as np
import pytest

from shock.core.executor import PlannedUnit, RoundColumns, RoundPlan, UnitProgress
from shock.plugins.backends.simulator import SimulatedExecutor

ROUND_START = 7213.37
ROUND_LENGTH = 360.0


def alone(job_id: int, rate: float, steps_left: float, overhead_s: float) -> PlannedUnit:
    return PlannedUnit(
        (job_id,), ("x",), "v100", (job_id,), (rate,), (steps_left,), overhead_s, True
    )


# (rate, steps left, overhead): full rounds, a job near its end, one slower than a step a
# round, a restart cost, fractional steps left; then many uneven rates and overheads.
ALONE = [
    alone(1, 2.5, 1e6, 0.0),
    alone(2, 3.7, 100.0, 0.0),
    alone(3, 0.001, 50.0, 0.0),
    alone(4, 1.3, 1e6, 20.0),
    alone(5, 0.9, 10.25, 20.0),
    alone(6, 1e3 / 3, 4e5, 0.0),
] + [
    alone(10 + i, 0.1 + (i * 0.7919) % 9.3, 1e6 if i % 3 else 17.0 + i / 7, (i % 4) * 7.3)
    for i in range(200)
]
PAIR = PlannedUnit((7, 8), ("x", "y"), "v100", (9,), (1.5, 0.5), (1e6, 20.0), 0.0, True)


def ran(units: list[PlannedUnit], quantised: bool, fewer_steps: bool) -> tuple[float, list]:
    executor = SimulatedExecutor()
    executor.quantised = quantised
    executor.fewer_steps = fewer_steps
    plan = RoundPlan(1, ROUND_START, ROUND_START + ROUND_LENGTH, tuple(units), ())
    report = executor.run_round(plan)
    assert executor.clock() == report.end_s
    return report.end_s, list(report.units)


@pytest.mark.parametrize("quantised", [False, True])
@pytest.mark.parametrize("fewer_steps", [False, True])
def test_jobs_alone_progress_as_they_do_beside_a_pair(quantised: bool, fewer_steps: bool) -> None:
    # A pair in the round changes nothing for the jobs alone.
    _, general = ran([*ALONE, PAIR], quantised, fewer_steps)
    end, together = ran(ALONE, quantised, fewer_steps)
    assert together == general[:-1]
    finishes = [finish for unit in together for finish in unit.stopped_s]
    assert end == max(finishes)


def test_a_round_of_jobs_alone_by_hand() -> None:
    def progress(steps: float, rate: float) -> UnitProgress:
        finish = ROUND_START + steps / rate
        return UnitProgress((steps,), (finish,), finish - ROUND_START)

    end, units = ran(ALONE[:3], quantised=False, fewer_steps=False)
    # Whole steps a round; what is left; one step, however long it takes.
    assert units == [progress(900, 2.5), progress(100.0, 3.7), progress(1, 0.001)]
    assert end == ROUND_START + 1 / 0.001


@pytest.mark.parametrize("quantised", [False, True])
def test_a_round_as_columns_reports_what_the_units_report(quantised: bool) -> None:
    end, units = ran(ALONE, quantised, fewer_steps=False)
    executor = SimulatedExecutor()
    executor.quantised = quantised
    plan = RoundColumns(
        1,
        ROUND_START,
        ROUND_START + ROUND_LENGTH,
        np.array([u.job_ids[0] for u in ALONE], dtype=np.int64),
        np.array([u.rates[0] for u in ALONE]),
        np.array([u.steps_left[0] for u in ALONE]),
        np.array([u.overhead_s for u in ALONE]),
    )
    progress = executor.run_round_columns(plan)
    assert progress.end_s == end == executor.clock()
    assert progress.steps.tolist() == [unit.steps[0] for unit in units]
    assert progress.stopped_s.tolist() == [unit.stopped_s[0] for unit in units]
    assert progress.exec_s.tolist() == [unit.exec_s for unit in units]
