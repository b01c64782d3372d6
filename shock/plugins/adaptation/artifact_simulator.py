"""Batch-size dynamics as Shockwave's round-by-round simulator evolves them
(`--adaptation-rules artifact-simulator`).

shock's default (`profile`) follows the per-epoch schedules of Shockwave's profile generator
(`dynamics.py`). Shockwave's own simulator (scheduler.py: `_simulate_accordion`,
`_simulate_gns`, `_scale_bs_and_iters`) evolves batch sizes differently, and the paper's
numbers come from it:

- Its epoch counter is the number of epochs *started*: ceil(steps done / steps per epoch).
- Accordion: a job at its initial batch size outside a critical regime jumps to the model's
  largest batch size; a job above it inside a critical regime drops back. The regimes have no
  30% warm-up, no Recommendation [60,70)/[80,90), and ResNet-50's e mod 30 < 10 has no end.
- GNS: when the measured schedule (of a job long enough to reach it) is above the current
  batch size at this epoch or the next, the batch size doubles, one doubling per change.
- A decision is taken at a round boundary from the job's progress then, and carried out at the
  end of the next round the job runs (after that round's steps are credited).
- A change keeps epochs, both rounded up: the completed epochs count the started one as done,
  and total steps become the new steps per epoch times the old total epochs unless simply
  scaling them by old/new batch size keeps that epoch count.

The shockwave policy's planner still reads the profile rules' per-epoch schedules, as
Shockwave's planner does while its simulator runs these dynamics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from shock.api import (
    JobSpec,
    JobState,
    Mechanism,
    PluginRegistry,
    job_type_with_batch_size,
    steps_per_epoch,
)
from shock.plugins.adaptation.patterns import accordion_rules, gns_rules

# Shockwave's simulator builds the GNS pattern of a job at least this many epochs long
# (scheduler.py `_simulate_gns`: max(760, current_epoch + 2)).
GNS_PATTERN_EPOCHS = 760
# Failed rounds after which Shockwave's simulator drops a job (scheduler.py MAX_FAILED_ATTEMPTS).
EMPTY_ROUNDS_BEFORE_EXIT = 5
_EPS = 1e-9


def started_epochs(steps_done: float, per_epoch: int) -> int:
    """Shockwave's simulator's current epoch: epochs begun, a partial one counted."""
    return max(0, math.ceil(steps_done / per_epoch - _EPS))


def accordion_critical(model: str, initial_batch_size: int, epoch: int) -> bool | None:
    """Whether `epoch` is in a critical regime by the simulator's rules; None for a model it
    never adapts (Transformer, CycleGAN, A3C, and initial sizes it does not define)."""
    if model == "LM":
        return epoch < 10
    if model == "Recommendation":
        # Head length by initial batch size (scheduler.py `_simulate_accordion`).
        head = {512: 30, 1024: 30, 2048: 40, 4096: 10, 8192: 10}.get(initial_batch_size)
        return None if head is None else epoch < head
    if model == "ResNet-50":
        return epoch % 30 < 10
    if model == "ResNet-18":
        head = 20 if initial_batch_size == 256 else 10
        return epoch < head or 150 <= epoch < 160 or 250 <= epoch < 260
    return None


def accordion_target(model: str, initial_batch_size: int, batch_size: int, epoch: int) -> int:
    """The batch size the simulator's Accordion asks for at `epoch` (the current one if none)."""
    largest = accordion_rules().max_batch_size.get(model)
    critical = accordion_critical(model, initial_batch_size, epoch)
    if critical is None or largest is None or initial_batch_size >= largest:
        return batch_size
    if batch_size == initial_batch_size and not critical:
        return largest
    if batch_size != initial_batch_size and critical:
        return initial_batch_size
    return batch_size


def gns_target(
    pattern_sizes: Callable[[], tuple[int, int]], model: str, batch_size: int
) -> int:
    """Double the batch size when the GNS pattern is above it at the current epoch or the
    next one (`pattern_sizes()`, asked only below the model's limit, where it can matter)."""
    limit = gns_rules().batch_size_limit.get(model)
    if limit is not None and batch_size >= limit:
        return batch_size
    if max(pattern_sizes()) > batch_size:
        return 2 * batch_size
    return batch_size


@dataclass(frozen=True, slots=True)
class RoundedUp:
    """Step counts after a change by the simulator's rules."""

    total_steps: int
    steps_done: int


def rescale_rounded_up(
    model: str, total_steps: int, steps_done: float, old_batch_size: int, new_batch_size: int
) -> RoundedUp:
    """Keep total epochs and count the started epoch as completed (`_scale_bs_and_iters`)."""
    old_per_epoch = steps_per_epoch(model, old_batch_size)
    new_per_epoch = steps_per_epoch(model, new_batch_size)
    total_epochs = math.ceil(total_steps / old_per_epoch)
    scaled = math.ceil(total_steps * old_batch_size / new_batch_size)
    if math.ceil(scaled / new_per_epoch) != total_epochs:
        scaled = new_per_epoch * total_epochs
    done = started_epochs(steps_done, old_per_epoch) * new_per_epoch
    return RoundedUp(scaled, done)


class ArtifactBatchDynamics:
    """Per-run state: each dynamic job's pending decision, carried out when it next runs."""

    def __init__(
        self,
        jobs: Iterable[JobSpec],
        registry: PluginRegistry,
        has_throughput: Callable[[str, int], bool],
    ) -> None:
        self._initial = {
            j.job_id: j for j in jobs if j.mode in ("accordion", "gns") and j.batch_size
        }
        self._registry = registry
        self._has_throughput = has_throughput  # (job type, scale factor) -> in the table
        self._pattern_lengths: dict[int, int] = {}  # job id -> its GNS pattern's length
        self._patterns: dict[int, list[int]] = {}  # job id -> its GNS pattern, when drawn
        self._pending: dict[int, int] = {}  # job id -> batch size asked for
        self._steps_per_epoch: dict[tuple[str, int], int] = {}

    def _gns_sizes(self, job: JobSpec, epoch: int) -> tuple[int, int]:
        """The GNS pattern's batch sizes at `epoch` and the next one. As in the simulator, a
        job's pattern is GNS_PATTERN_EPOCHS long and is drawn again, epoch + 2 long, only
        when it no longer reaches past the next epoch (its length matters: the last epoch
        has its own rule)."""
        length = self._pattern_lengths.get(job.job_id, 0)
        if length < epoch + 2:
            length = self._pattern_lengths[job.job_id] = max(GNS_PATTERN_EPOCHS, epoch + 2)
        pattern = self._patterns.get(job.job_id)
        if pattern is not None and len(pattern) == length:
            return pattern[epoch], pattern[epoch + 1]
        gns = self._registry.get("adaptation", "gns")
        size_at = getattr(gns, "batch_size_at", None)
        if size_at is not None and length > GNS_PATTERN_EPOCHS:
            # Past its first length a pattern grows with the epoch, round after round: two
            # entries (the built-in plugin's batch_size_at), not thousands.
            return size_at(job, length, epoch), size_at(job, length, epoch + 1)
        pattern = self._patterns[job.job_id] = gns.batch_sizes(job, length)
        return pattern[epoch], pattern[epoch + 1]

    def _epoch(self, model: str, batch_size: int, steps_done: float) -> int:
        per_epoch = self._steps_per_epoch.get((model, batch_size))
        if per_epoch is None:
            per_epoch = self._steps_per_epoch[model, batch_size] = steps_per_epoch(
                model, batch_size
            )
        return started_epochs(steps_done, per_epoch)

    def decide(self, states: Iterable[JobState]) -> None:
        """At a round boundary: each dynamic job's decision from its progress now."""
        for state in states:
            initial = self._initial.get(state.job_id)
            if initial is None:
                continue
            current = state.spec.batch_size
            initial_size = initial.batch_size
            if current is None or initial_size is None:
                continue
            model = initial.model_family
            epoch = self._epoch(model, current, state.steps_done)
            if initial.mode == "gns":
                # (At the model's limit the batch size never changes again: the pattern, and
                # its length, no longer matter.)
                sizes = partial(self._gns_sizes, initial, epoch)
                target = gns_target(sizes, model, current)
            else:
                target = accordion_target(model, initial_size, current, epoch)
            if target != current:
                self._pending[state.job_id] = target
            else:
                self._pending.pop(state.job_id, None)

    def apply_pending(self, mechanism: Mechanism, state: JobState) -> bool:
        """After a round the job ran: carry out its pending change; return whether it changed.
        A batch size the table lacks is refused and the job keeps its own (as the artifact)."""
        target = self._pending.pop(state.job_id, None)
        current = state.spec.batch_size
        if target is None or current is None or target == current:
            return False
        model = state.spec.model_family
        job_type = job_type_with_batch_size(model, target)
        if not self._has_throughput(job_type, state.spec.scale_factor):
            return False
        new = rescale_rounded_up(model, state.total_steps, state.steps_done, current, target)
        mechanism.change_job_type(state, job_type, new.total_steps, new.steps_done)
        if new.steps_done >= new.total_steps:
            # Rounding up reached the total: the simulator's job has no steps left, yet it is
            # not complete. Each round it is given, it does nothing (a failed micro-task); the
            # fifth such round drops it, its completion time that round's start.
            state.empty_rounds_left = EMPTY_ROUNDS_BEFORE_EXIT
        return True
