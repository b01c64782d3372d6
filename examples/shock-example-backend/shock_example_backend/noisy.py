"""`noisy`: the simulator's virtual-time rounds, with jobs that do not run at the planned rate.

Real jobs never run exactly at the throughput table's rate: here each job runs, in each round,
at the rate the engine planned with times a factor drawn uniformly from
[1 - noise, 1 + noise]. The factor depends only on (seed, job id, round index), so a run is
reproducible and a job's speed in a round does not depend on what else runs. With
`--noise 0` every factor is 1 and the run is exactly the simulator's.

This module is everything a backend plugin needs, written against `shock.api` only:

1. an executor (`NoisyExecutor`) that carries each round's plan out and reports the steps
   every job made and when it stopped; the engine decides everything else;
2. the options, a frozen dataclass whose fields (type, default, help) become
   `shock run --backend noisy --noise 0.2 --noise-seed 3`;
3. a backend object with a `name`, a `description`, `options_type` and
   `run(request) -> RunResult`, which hands its executor to `run_engine`;
4. a `register_backends` hook function, and an entry point in the `shock` group of the
   package's `pyproject.toml` naming this module.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from shock.api import (
    Cluster,
    ExecutorCapabilities,
    JobSpec,
    Register,
    RoundPlan,
    RoundReport,
    RunRequest,
    RunResult,
    UnitProgress,
    hookimpl,
    run_engine,
)


@dataclass(frozen=True, slots=True)
class NoisyOptions:
    noise: float = field(
        default=0.1,
        metadata={"help": "Each job runs at its planned rate times a factor drawn uniformly "
                          "from [1 - noise, 1 + noise], per job and round (0: the simulator)."},
    )  # fmt: skip
    noise_seed: int = field(
        default=0, metadata={"help": "Seed of the factors: the same seed, the same run."}
    )

    def __post_init__(self) -> None:
        # Raised as ValueError, shock shows the message with the backend's name.
        if not 0.0 <= self.noise < 1.0:
            raise ValueError(f"--noise must be in [0, 1), got {self.noise}")


class NoisyExecutor:
    """Progress on virtual time: a job at rate r x factor for the round, less the (re)start
    overhead the engine charged, makes that many whole steps (at least one, at most what it
    has left) and stops when they are done."""

    # The executor computes progress itself: the engine's batch-size rules apply.
    capabilities = ExecutorCapabilities(simulates_jobs=True)

    def __init__(self, options: NoisyOptions) -> None:
        self.options = options
        self.now = 0.0
        self.quantised = False

    def factor(self, job_id: int, round_index: int) -> float:
        """The job's speed in that round, relative to the planned rate."""
        noise = self.options.noise
        if noise == 0.0:
            return 1.0
        draw = random.Random(f"{self.options.noise_seed}/{job_id}/{round_index}").random()
        return 1.0 + noise * (2.0 * draw - 1.0)

    def start(self, request: RunRequest, jobs: tuple[JobSpec, ...]) -> Cluster:
        # Synergy's semantics: jobs finish at the end of the round, rounds last their length.
        self.quantised = request.config.quantised_rounds
        self.now = jobs[0].arrival_time if jobs else 0.0
        return request.cluster

    def clock(self) -> float:
        return self.now

    def run_round(self, plan: RoundPlan) -> RoundReport:
        start = plan.start_s
        length = plan.end_s - start
        end = start
        units = []
        for unit in plan.units:
            lost = unit.overhead_s
            steps: list[float] = []
            stopped: list[float] = []
            for job_id, rate, left in zip(unit.job_ids, unit.rates, unit.steps_left, strict=True):
                speed = rate * self.factor(job_id, plan.index)
                count = min(max(int(speed * (length - lost)), 1), left)
                steps.append(count)
                stopped.append(plan.end_s if self.quantised else start + lost + count / speed)
            unit_end = max(stopped)
            units.append(UnitProgress(tuple(steps), tuple(stopped), unit_end - start))
            end = max(end, unit_end)
        self.now = end
        return RoundReport(end, tuple(units))

    def idle_until(self, time_s: float) -> None:
        self.now = max(self.now, time_s)

    def cluster_changed(self) -> Cluster | None:
        return None  # a simulated cluster never changes

    def stop(self) -> None:
        return None


class NoisySimulator:
    name = "noisy"
    description = "example plugin: the simulator with each job's speed varying at random per round"
    options_type = NoisyOptions

    def run(self, request: RunRequest) -> RunResult:
        options = request.backend_options_as(NoisyOptions)
        return run_engine(request, NoisyExecutor(options), self.name)


@hookimpl
def register_backends(register: Register) -> None:
    """Called once by shock's plugin registry."""
    register(NoisySimulator())
