"""The training harness: runs a workload's loop under a lease, checkpoints, resumes, reports.

Everything the agent can ask for (lease renewal, preemption, a batch-size change) takes effect
at an iteration boundary. Progress is counted in optimiser steps at the current batch size;
`target_steps` starts as the trace's step count at the initial batch size and is rescaled
when the batch size changes, so the job trains on exactly `target_steps x initial batch size`
samples in all.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from shock.core.errors import ShockError
from shock.job.adaptation import (
    AdaptationPolicy,
    GradientSample,
    StaticPolicy,
    make_policy,
)
from shock.job.channel import Channel
from shock.job.control import JobControl
from shock.job.limits import ProcessLimits
from shock.job.messages import (
    AdaptationReason,
    BatchSizeRequest,
    CheckpointWritten,
    Exit,
    ExitReason,
    Progress,
    Started,
)
from shock.workloads.checkpoint import load_latest_checkpoint, write_checkpoint
from shock.workloads.families import FAMILIES, parse_job_type
from shock.workloads.gang import Gang, Rendezvous
from shock.workloads.progress import TrainingProgress
from shock.workloads.workload import build_workload

ADAPTATION_MODES = ("static", "accordion", "gns")


class CheckpointMismatchError(ShockError):
    """The checkpoint directory holds another job's checkpoint."""


@dataclass(frozen=True, slots=True)
class JobConfig:
    job_id: int
    job_type: str
    target_steps: int
    checkpoint_dir: Path
    seed: int = 0
    adaptation: str = "static"
    device: str = "cpu"
    report_every_s: float = 1.0
    lease_steps: int | None = None
    lease_s: float | None = None
    checkpoint_every_s: float = 10.0
    # Samples per adaptation window; None: one epoch of the workload's synthetic data.
    adaptation_window_samples: int | None = None
    # One rank of a gang (data-parallel over several processes); None: a job of one process.
    rendezvous: Rendezvous | None = None

    def __post_init__(self) -> None:
        if self.target_steps < 1:
            raise ValueError(f"target steps must be >= 1, got {self.target_steps}")
        if self.adaptation not in ADAPTATION_MODES:
            raise ValueError(
                f"unknown adaptation {self.adaptation!r}; valid: {', '.join(ADAPTATION_MODES)}"
            )
        if self.rendezvous is not None and self.adaptation != "static":
            raise ValueError(
                f"adaptation {self.adaptation!r} needs one process; a gang trains static"
            )
        for name in ("report_every_s", "checkpoint_every_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.lease_steps is not None and self.lease_steps < 0:
            raise ValueError(f"lease steps must be >= 0, got {self.lease_steps}")
        if self.lease_s is not None and self.lease_s < 0:
            raise ValueError(f"lease seconds must be >= 0, got {self.lease_s}")


class TrainingHarness:
    def __init__(
        self,
        config: JobConfig,
        channel: Channel,
        clock: Callable[[], float] = time.monotonic,
        launched_at: float | None = None,
        limits: ProcessLimits | None = None,
    ) -> None:
        """`launched_at` (on `clock`): when the process started; the initial `lease_s` counts
        from then, so start-up time is inside the lease the agent granted. `limits`: what the
        process runs under, reported in its "started" message."""
        self.config = config
        self.limits = limits
        self.launched_at = launched_at
        self.channel = channel
        self.clock = clock
        self.family, self.initial_batch_size = parse_job_type(config.job_type)
        self.workload = build_workload(self.family, config.seed, config.device)
        family = FAMILIES[self.family]
        window = config.adaptation_window_samples or self.workload.data.num_samples
        self.policy: AdaptationPolicy = make_policy(
            config.adaptation,
            self.initial_batch_size,
            family.accordion_max_batch_size,
            family.gns_batch_size_limit,
            window,
        )
        self.progress = TrainingProgress.start(config.target_steps, self.initial_batch_size)
        # The contract's bookkeeping at iteration boundaries, shared with `shock.job`.
        self.control = JobControl(
            channel, clock, config.report_every_s, config.checkpoint_every_s
        )
        self.resumed_from_step = 0
        self._requested_batch_size: int | None = None
        # The losses of the current reporting interval.
        self._losses: list[float] = []
        self._resume()
        self.gang: Gang | None = None
        if config.rendezvous is not None:
            self.gang = Gang(config.rendezvous, self.workload.device)
            self.gang.check_same_step(self.progress.step)
            self.gang.broadcast_parameters(self.workload.model)

    @property
    def is_lead(self) -> bool:
        """Writes checkpoints and reports progress: the job alone, or its gang's rank 0."""
        return self.gang is None or self.gang.rank == 0

    # -- control ------------------------------------------------------------------------

    def preempt(self) -> None:
        """Stop at the next iteration boundary (safe to call from a signal handler)."""
        self.control.preempt()

    def run(self) -> ExitReason:
        progress = self.progress
        self.channel.send(
            Started(
                self.config.job_id,
                progress.step,
                progress.batch_size,
                self.resumed_from_step,
                self.limits,
            )
        )
        control = self.control
        control.start(progress.step, self.config.lease_steps, self.config.lease_s,
                      self.launched_at)  # fmt: skip
        self._losses = []
        while True:
            control.receive(self.progress.step)
            if control.approved_batch_size is not None:
                self._switch_batch_size(control.approved_batch_size)
            now = self.clock()
            if progress.done:
                return self._finish("done")
            stop, expired = control.must_stop(progress.step, now)
            if self.gang is not None:
                stop, expired = self.gang.agree_to_stop(stop, expired)
            if stop:
                return self._finish("preempted")
            if expired:
                return self._finish("lease_expired")
            control.renew_if_near(progress.step, now)
            self._losses.append(self._train_step())
            now = self.clock()
            control.stepped(progress.step, now)
            if control.report_due(now):
                self._report(now)
            if control.checkpoint_due(now):
                self._checkpoint(now)

    def _switch_batch_size(self, batch_size: int) -> None:
        """Rescale the remaining steps so the total number of samples stays the same."""
        self.control.approved_batch_size = None
        self._requested_batch_size = None
        if self.progress.switch(batch_size):
            self.policy.batch_size_changed(self.progress.samples)

    # -- one iteration ------------------------------------------------------------------

    def _train_step(self) -> float:
        progress, workload = self.progress, self.workload
        size = progress.next_batch_size()
        if self.gang is not None:
            loss = self._gang_step(self.gang, progress.samples, size)
            progress.advance(size)
            return loss
        if self.policy.needs_small_batch and size >= 2:
            batch = workload.batch(progress.samples, size)
            workload.optimizer.zero_grad(set_to_none=True)
            loss, sample = self._backward_in_two_parts(batch, size)
            workload.optimizer.step()
        else:
            loss = workload.train_step(progress.samples, size)
            sample = GradientSample(size, self._gradient_sq_norm())
        progress.advance(size)
        if self.policy.needs_small_batch and sample.small_batch_size is None:
            return loss  # a one-sample last batch has no part to compare with
        wanted = self.policy.observe(sample, progress.samples)
        if (
            wanted is not None
            and wanted != progress.batch_size
            and wanted != self._requested_batch_size
            and not progress.done
        ):
            reason: AdaptationReason = "gns" if self.policy.name == "gns" else "accordion"
            self.channel.send(BatchSizeRequest(progress.step, wanted, reason))
            self._requested_batch_size = wanted
        return loss

    def _gang_step(self, gang: Gang, position: int, size: int) -> float:
        """This rank's part of one data-parallel step over the global batch at `position`.
        Its loss is weighted by its share of the batch, so the averaged gradient is the
        whole batch's mean gradient whatever the parts' sizes."""
        workload = self.workload
        start, end = gang.shard(size)
        part = tuple(t[start:end] for t in workload.batch(position, size))
        workload.optimizer.zero_grad(set_to_none=True)
        loss_value = math.nan  # no sample of a last batch smaller than the gang
        if end > start:
            loss = workload.loss(workload.model, part)
            (loss * (gang.world_size * (end - start) / size)).backward()
            loss_value = loss.item()
        gang.average_gradients(workload.model)
        workload.optimizer.step()
        return loss_value

    def _backward_in_two_parts(
        self, batch: tuple[torch.Tensor, ...], size: int
    ) -> tuple[float, GradientSample]:
        """The batch's mean gradient, accumulated from two halves; the first half's gradient
        norm is read in between: the small-batch measurement GNS needs, for the price of two
        half-size passes instead of one full one."""
        workload = self.workload
        small = size // 2
        first = tuple(t[:small] for t in batch)
        second = tuple(t[small:] for t in batch)
        first_loss = workload.loss(workload.model, first)
        (first_loss * (small / size)).backward()
        small_sq_norm = self._gradient_sq_norm() / (small / size) ** 2
        second_loss = workload.loss(workload.model, second)
        (second_loss * ((size - small) / size)).backward()
        loss = (first_loss.item() * small + second_loss.item() * (size - small)) / size
        return loss, GradientSample(size, self._gradient_sq_norm(), small, small_sq_norm)

    def _gradient_sq_norm(self) -> float:
        if isinstance(self.policy, StaticPolicy):
            return 0.0  # nobody reads it; skip the reduction
        total = torch.zeros((), device=self.workload.device)
        for parameter in self.workload.model.parameters():
            if parameter.grad is not None:
                total += parameter.grad.detach().pow(2).sum()
        return float(total)

    # -- reports, checkpoints, exit -------------------------------------------------------

    def _report(self, now: float) -> None:
        progress = self.progress
        rate = self.control.take_rate(progress.step, now)
        if rate is None:
            return
        losses = [loss for loss in self._losses if math.isfinite(loss)]
        mean_loss = sum(losses) / len(losses) if losses else math.nan
        self._losses = []
        # A progress line in the job's log (stderr; stdout is the job channel), each rank's
        # own in a gang: what `shock logs` shows of a built-in job.
        rank = "" if self.gang is None else f"rank {self.gang.rank}/{self.gang.world_size}: "
        print(
            f"{rank}step {progress.step}/{progress.target_steps} loss {mean_loss:.6g} "
            f"steps/s {rate:.3g} batch size {progress.batch_size}",
            file=sys.stderr,
            flush=True,
        )
        if not self.is_lead:
            return
        self.channel.send(
            Progress(
                step=progress.step,
                steps_per_s=rate,
                batch_size=progress.batch_size,
                loss=mean_loss if math.isfinite(mean_loss) else None,
                target_steps=progress.target_steps,
                samples=progress.samples,
            )
        )

    def _finish(self, reason: ExitReason) -> ExitReason:
        now = self.clock()
        self._report(now)
        if self.control.last_checkpoint_step != self.progress.step:
            self._checkpoint(now)
        self.channel.send(Exit(reason, self.progress.step, self.progress.target_steps))
        return reason

    def _checkpoint(self, now: float) -> None:
        self.control.checkpointed(self.progress.step, now)
        if not self.is_lead:
            return  # the gang's weights are the same on every rank: rank 0 saves them
        path = write_checkpoint(
            self.config.checkpoint_dir, self.progress.step, self._checkpoint_state()
        )
        self.channel.send(CheckpointWritten(self.progress.step, str(path)))

    def _checkpoint_state(self) -> dict[str, Any]:
        progress, workload = self.progress, self.workload
        rng = {"torch": torch.get_rng_state()}
        if workload.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(workload.device)
        return {
            "job_id": self.config.job_id,
            "job_type": self.config.job_type,
            "family": self.family,
            "seed": self.config.seed,
            "original_target_steps": self.config.target_steps,
            "initial_batch_size": self.initial_batch_size,
            "step": progress.step,
            "samples": progress.samples,
            "batch_size": progress.batch_size,
            "target_steps": progress.target_steps,
            "total_samples": progress.total_samples,
            "model": workload.model.state_dict(),
            "optimizer": workload.optimizer.state_dict(),
            "rng": rng,
            "adaptation": {"mode": self.policy.name, "state": self.policy.state_dict()},
        }

    def _resume(self) -> None:
        found = load_latest_checkpoint(self.config.checkpoint_dir)
        if found is None:
            return
        path, state = found
        expected = {
            "job_type": self.config.job_type,
            "seed": self.config.seed,
            "original_target_steps": self.config.target_steps,
            "adaptation": self.policy.name,
        }
        actual = {key: state[key] for key in expected} | {"adaptation": state["adaptation"]["mode"]}
        for key, value in expected.items():
            if actual[key] != value:
                raise CheckpointMismatchError(
                    f"{path}: checkpoint field {key!r} is {actual[key]!r}, this job has {value!r}"
                )
        workload = self.workload
        workload.model.load_state_dict(state["model"])
        workload.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"]["torch"])
        if "cuda" in state["rng"] and workload.device.type == "cuda":
            torch.cuda.set_rng_state(state["rng"]["cuda"], workload.device)
        self.policy.load_state_dict(state["adaptation"]["state"])
        self.progress = TrainingProgress(
            step=state["step"],
            samples=state["samples"],
            batch_size=state["batch_size"],
            target_steps=state["target_steps"],
            total_samples=state["total_samples"],
        )
        self.resumed_from_step = state["step"]
        self.control.last_checkpoint_step = state["step"]
