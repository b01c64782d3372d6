"""How a job of one of Pollux's applications advances, as Pollux's simulator advances it.

Progress is counted in iterations at the application's initial batch size M0 (the
`progress` column of its validation runs): a step at total batch size M on a placement of
`nodes` nodes and `replicas` GPUs takes the step-time model's time (shock.goodput.model,
with gradient accumulation) and earns

    gain = (var + sqr) / (var / (M / M0) + sqr)

of progress, where sqr and var are the gradient statistics measured during the current
epoch at batch size M (interpolated between the validated batch sizes). Epoch e ends at
progress P(e), the smallest progress any validation run had by the end of its e-th epoch; a
job finishes when it ends its last epoch (`max_epochs`). A job's goodput changes at each
epoch boundary (new gradient statistics); `advance` follows them within a stretch of time.

The engine counts an elastic job's progress in its trace's steps: `total_steps` steps stand
for the whole target P(max_epochs), so a fraction of the steps is the same fraction of the
target.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import cache

from shock.core.policy import ElasticGrant
from shock.goodput import applications
from shock.goodput.model import BatchLimits, PerfParams


@dataclass(frozen=True, slots=True)
class Configuration:
    """A job's placement and batch size: `nodes` nodes, `replicas` GPUs, `atomic_bsz`
    samples per GPU per micro-batch and `accum_steps` extra micro-batches per step."""

    nodes: int
    replicas: int
    atomic_bsz: int
    accum_steps: int = 0

    @property
    def batch_size(self) -> int:
        return self.replicas * self.atomic_bsz * (self.accum_steps + 1)


def fixed_batch_configuration(
    limits: BatchLimits, nodes: int, replicas: int, batch_size: int
) -> Configuration:
    """A fixed total batch size split over `replicas` GPUs as Pollux's simulator splits it:
    the local batch in as few micro-batches as fit `max_local_bsz`, at least two on a single
    GPU above M0 (its gradient statistics need two), the atomic batch capped so that the
    total stays within the largest batch."""
    local = math.ceil(batch_size / replicas - 1e-8)
    accum = math.ceil(local / limits.max_local_bsz - 1e-8) - 1
    if replicas == 1 and batch_size > limits.init_batch_size:
        accum = max(1, accum)
    atomic = math.ceil(local / (accum + 1) - 1e-8)
    count = replicas * (accum + 1)
    atomic = max(1, min(atomic, int(limits.max_batch_size / count)))
    return Configuration(nodes, replicas, atomic, accum)


def fixed_batch_grant(
    worker_type: str, gpus: int, nodes: int, limits: BatchLimits, batch_size: int
) -> ElasticGrant:
    """A grant that keeps a job's own total batch size on `gpus` GPUs over `nodes` nodes (the
    baselines that do not adapt batch sizes: Optimus, Tiresias as Pollux's artifact runs it)."""
    config = fixed_batch_configuration(limits, nodes, gpus, batch_size)
    return ElasticGrant(
        worker_type,
        gpus,
        nodes,
        batch_size=config.batch_size,
        atomic_batch_size=config.atomic_bsz,
        accumulation_steps=config.accum_steps,
    )


def step_seconds(params: PerfParams, config: Configuration) -> float:
    """Seconds per step (all micro-batches and the synchronisation), by the step-time model."""
    compute = params.alpha_c + params.beta_c * config.atomic_bsz
    if config.nodes > 1:
        network = params.alpha_n + params.beta_n * max(config.replicas - 2, 0)
    elif config.replicas > 1:
        network = params.alpha_r + params.beta_r * max(config.replicas - 2, 0)
    else:
        network = 0.0
    g = params.gamma
    sync = compute if network <= 0 else (compute**g + network**g) ** (1.0 / g)
    return config.accum_steps * compute + sync


@dataclass(frozen=True)
class TrainingCurve:
    """One application's epochs: where each ends in progress, and its gradient statistics
    per validated batch size and epoch."""

    name: str
    limits: BatchLimits
    perf: PerfParams
    epoch_ends: tuple[float, ...]  # P(1), ..., P(max_epochs)
    batch_sizes: tuple[int, ...]  # validated, ascending
    grads: tuple[tuple[tuple[float, float], ...], ...]  # [size][epoch] -> (sqr, var)
    iterations: tuple[tuple[int, ...], ...]  # [size][epoch] -> steps done by its end

    @property
    def target(self) -> float:
        return self.epoch_ends[-1]

    @property
    def max_epochs(self) -> int:
        return len(self.epoch_ends)

    def epoch_at(self, progress: float) -> int:
        """The epoch a job is in at `progress` (0-based; max_epochs once finished)."""
        return bisect.bisect_right(self.epoch_ends, progress)

    def grad_stats(self, batch_size: int, epoch: int) -> tuple[float, float]:
        """(sqr, var) during `epoch` at `batch_size`, linear between validated sizes."""
        sizes = self.batch_sizes
        epoch = min(max(epoch, 0), self.max_epochs - 1)
        size = min(max(batch_size, sizes[0]), sizes[-1])
        upper = bisect.bisect_left(sizes, size)
        if sizes[upper] == size:
            return self.grads[upper][epoch]
        lower = upper - 1
        low, high = sizes[lower], sizes[upper]
        low_sqr, low_var = self.grads[lower][epoch]
        high_sqr, high_var = self.grads[upper][epoch]
        weight = (size - low) / (high - low)
        return (
            low_sqr + weight * (high_sqr - low_sqr),
            low_var + weight * (high_var - low_var),
        )

    def iterations_by(self, batch_size: int, epoch: int) -> float:
        """Steps a run at `batch_size` has done by the end of `epoch` (linear between
        validated sizes, as Pollux's simulator reads them)."""
        sizes = self.batch_sizes
        epoch = min(max(epoch, 0), self.max_epochs - 1)
        size = min(max(batch_size, sizes[0]), sizes[-1])
        upper = bisect.bisect_left(sizes, size)
        if sizes[upper] == size:
            return float(self.iterations[upper][epoch])
        low, high = sizes[upper - 1], sizes[upper]
        low_it, high_it = self.iterations[upper - 1][epoch], self.iterations[upper][epoch]
        return ((size - low) * high_it + (high - size) * low_it) / (high - low)

    def gain(self, batch_size: int, epoch: int) -> float:
        """Progress one step at `batch_size` earns during `epoch`."""
        sqr, var = self.grad_stats(batch_size, epoch)
        scale = batch_size / self.limits.init_batch_size
        denominator = var / scale + sqr
        return scale if denominator <= 0 else (var + sqr) / denominator

    def goodput(self, config: Configuration, epoch: int, step_s: float | None = None) -> float:
        """Progress per second on `config` during `epoch` (steps of `step_s` seconds where
        given, else of the step-time model's)."""
        seconds = step_seconds(self.perf, config) if step_s is None else step_s
        return self.gain(config.batch_size, epoch) / seconds

    def advance(
        self, progress: float, config: Configuration, seconds: float, step_s: float | None = None
    ) -> tuple[float, float]:
        """Run `config` for up to `seconds` from `progress`: (progress made, seconds used),
        stopping early at the target. Each epoch runs at its own goodput (steps of `step_s`
        seconds where given, else of the step-time model's)."""
        made = 0.0
        used = 0.0
        target = self.target
        while used < seconds and progress + made < target:
            now = progress + made
            epoch = self.epoch_at(now)
            rate = self.goodput(config, epoch, step_s)
            if rate <= 0:
                break
            to_epoch_end = self.epoch_ends[epoch] - now
            left = seconds - used
            if rate * left < to_epoch_end:
                made += rate * left
                used = seconds
                break
            made += to_epoch_end
            used += to_epoch_end / rate
        return made, used


@cache
def curve(name: str) -> TrainingCurve:
    """The training curve of the bundled application `name` (KeyError if unknown)."""
    app = applications.application(name)
    runs = app.validation
    epochs = app.max_epochs
    ends = tuple(min(run[e].progress for run in runs.values()) for e in range(epochs))
    sizes = tuple(sorted(runs))
    grads = tuple(
        tuple(
            (runs[size][min(e, len(runs[size]) - 1)].grad.sqr,
             runs[size][min(e, len(runs[size]) - 1)].grad.var)
            for e in range(epochs)
        )
        for size in sizes
    )  # fmt: skip
    iterations = tuple(
        tuple(runs[size][min(e, len(runs[size]) - 1)].iteration for e in range(epochs))
        for size in sizes
    )
    return TrainingCurve(name, app.limits, app.perf, ends, sizes, grads, iterations)
