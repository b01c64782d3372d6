"""A job session: what a person's own training script uses to run under shock.

    from shock import job
    with job.session() as s:
        state = s.restore() or {"step": 0}
        for step in s.steps(total=2000, start=state["step"]):
            ...                                 # one training step
            state["step"] = step + 1
            if s.checkpoint_due():
                s.checkpoint(state)
        s.checkpoint(state)

Launched by a shock worker (its environment has `SHOCK_CHANNEL`), the session speaks the job
contract with its agent: "started", a "progress" report every second (the measured steps/s),
"checkpoint" after each write, lease requests, batch-size requests, and "exit" at the end;
`steps()` stops early when the job is preempted or its lease runs out. Anywhere else it is a
local session: nobody preempts it, and it runs to the end. No torch is imported here.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Literal

from shock.job.channel import Channel, NullChannel, StdioChannel
from shock.job.checkpoint import load_latest_object, save_object
from shock.job.control import JobControl
from shock.job.environment import JobEnvironment, read_environment
from shock.job.gradients import GradientStatistics
from shock.job.messages import (
    AdaptationReason,
    BatchSizeRequest,
    CheckpointWritten,
    Error,
    Exit,
    ExitReason,
    Progress,
    Started,
)

Stopped = Literal["preempted", "lease_expired"]


class Session:
    """One run of a job. Use `shock.job.session()` to make one."""

    def __init__(
        self,
        environment: JobEnvironment,
        channel: Channel,
        batch_size: int | None = None,
        max_batch_size: int | None = None,
        checkpoint_dir: Path | None = None,
    ) -> None:
        self.environment = environment
        self.channel = channel
        self.checkpoint_dir = checkpoint_dir or environment.checkpoint_dir
        self.control = JobControl(
            channel,
            time.monotonic,
            environment.report_every_s,
            environment.checkpoint_every_s,
        )
        self._launched_at = time.monotonic()
        self.step = 0
        self.total: int | None = environment.target_steps
        self.stopped: Stopped | None = None
        self.resumed_from_step = 0
        self._started = False
        self._ended = False
        self._loss_sum = 0.0
        self._loss_count = 0
        initial = environment.batch_size or batch_size
        self._batch_size = initial or 0
        self._requested_batch_size: int | None = None
        self.gradients = GradientStatistics.for_mode(
            environment.adaptation, initial, max_batch_size
        )

    # What the script may read.

    @property
    def under_shock(self) -> bool:
        """True when a shock worker launched this process (False: a local session)."""
        return self.environment.under_shock

    @property
    def job_id(self) -> int | None:
        return self.environment.job_id

    @property
    def device(self) -> str:
        """The device the scheduler gave this run: "cpu" or "cuda:N"."""
        return self.environment.device

    @property
    def rank(self) -> int:
        return self.environment.rank

    @property
    def world_size(self) -> int:
        return self.environment.world_size

    @property
    def local_rank(self) -> int:
        return self.environment.local_rank

    @property
    def is_lead(self) -> bool:
        """Rank 0 (or a job of one process): it writes checkpoints and reports progress."""
        return self.environment.rank == 0

    @property
    def batch_size(self) -> int | None:
        """The batch size to train at now; it changes when the scheduler approves a request."""
        return self._batch_size or None

    # Checkpoints.

    def restore(self) -> Any:
        """The object of the newest checkpoint that loads, or None before the first."""
        found = load_latest_object(self.checkpoint_dir)
        if found is None:
            return None
        return found[1]

    def checkpoint_due(self) -> bool:
        """True when a periodic checkpoint is due, or the job is about to stop."""
        control = self.control
        if control.last_checkpoint_step == self.step:
            return False
        if control.preempt_requested or not self.channel.connected():
            return True
        return control.checkpoint_due(time.monotonic())

    def checkpoint(self, state: object) -> Path | None:
        """Save `state` (any picklable or torch-saveable object) atomically as the checkpoint
        of the current step. Only the lead writes (a gang's ranks hold the same state)."""
        self.control.checkpointed(self.step, time.monotonic())
        if not self.is_lead:
            return None
        path = save_object(self.checkpoint_dir, self.step, state)
        self.checkpoint_written(path)
        return path

    def checkpoint_written(self, path: Path | str) -> None:
        """A checkpoint of the current step that the script (or its framework) wrote itself
        is complete at `path`: the scheduler's record of where the job can resume."""
        self.control.checkpointed(self.step, time.monotonic())
        if self.is_lead:
            self.channel.send(CheckpointWritten(self.step, str(path)))

    # The loop.

    def steps(self, total: int, start: int = 0) -> Iterator[int]:
        """Yields start, start+1, ..., total-1; a step counts as done when the loop asks for
        the next. Stops early when the job is preempted or its lease runs out (`stopped`
        says which)."""
        self.begin(total, start)
        step = start
        while step < total and not self.should_stop():
            yield step
            step += 1
            self.advance_to(step)
        self.report()

    # The same loop for a framework's callbacks: begin, then at every step boundary
    # should_stop() and advance_to().

    def begin(self, total: int, start: int = 0) -> None:
        """The loop runs steps start..total-1 (it resumed at `start`)."""
        if total < 0 or start < 0:
            raise ValueError(f"steps(total={total}, start={start}): both must be >= 0")
        self.total = total
        self.step = start
        self.resumed_from_step = start
        self.control.last_checkpoint_step = start if start > 0 else None
        self._announce()
        self.control.start(start, None, self.environment.lease_s, self._launched_at)

    def should_stop(self) -> bool:
        """At a step boundary: apply the agent's commands; True when the job must stop now
        (preempted, or its lease ran out: `stopped` says which)."""
        control, step = self.control, self.step
        control.receive(step)
        if control.approved_batch_size is not None:
            self._switch_batch_size(control.approved_batch_size)
        now = time.monotonic()
        stop, expired = control.must_stop(step, now)
        if self.world_size > 1:
            stop, expired = _agree_to_stop(stop, expired)
        if stop or expired:
            self.stopped = "preempted" if stop else "lease_expired"
            return True
        control.renew_if_near(step, now)
        return False

    def advance_to(self, step: int) -> None:
        """Steps up to `step` are done; a progress report goes out when one is due."""
        self.step = step
        now = time.monotonic()
        self.control.stepped(step, now)
        if self.control.report_due(now):
            self.report(now)

    def log_loss(self, loss: float) -> None:
        """A step's loss, averaged into the next progress report (optional)."""
        if math.isfinite(loss):
            self._loss_sum += loss
            self._loss_count += 1

    def report(self, now: float | None = None) -> None:
        """Send a progress report now (the loop sends one every second by itself)."""
        now = time.monotonic() if now is None else now
        rate = self.control.take_rate(self.step, now)
        if rate is None or not self.is_lead:
            return
        loss = self._loss_sum / self._loss_count if self._loss_count else None
        self._loss_sum, self._loss_count = 0.0, 0
        target = self.total if self.total is not None else self.step
        self.channel.send(Progress(self.step, rate, self._batch_size, loss, target, 0))

    # Batch size (Accordion, GNS or the script's own choice).

    def request_batch_size(self, batch_size: int, reason: str = "accordion") -> None:
        """Ask the scheduler for another batch size; `batch_size` changes once approved.
        A local session approves at once."""
        if batch_size < 1:
            raise ValueError(f"batch size must be >= 1, got {batch_size}")
        if batch_size in (self._batch_size, self._requested_batch_size):
            return
        self._requested_batch_size = batch_size
        if not self.under_shock:
            self._switch_batch_size(batch_size)
            return
        kind: AdaptationReason = "gns" if reason == "gns" else "accordion"
        self.channel.send(BatchSizeRequest(self.step, batch_size, kind))

    def observe_gradients(
        self,
        model: Any = None,
        *,
        sq_norm: float | None = None,
        small_sq_norm: float | None = None,
        small_batch_size: int | None = None,
        samples: int | None = None,
    ) -> None:
        """One step's gradient statistics for the job's adaptation mode (SHOCK_ADAPTATION:
        Accordion or GNS): the squared gradient norm, read from `model`'s parameters or given,
        and for GNS that of a part of the batch. A change the mode wants is requested."""
        if self.gradients is None:
            return
        if sq_norm is None:
            if model is None:
                raise ValueError("observe_gradients needs a model or sq_norm")
            sq_norm = gradient_sq_norm(model)
        wanted = self.gradients.observe(
            self._batch_size, sq_norm, small_batch_size, small_sq_norm, samples
        )
        if wanted is not None:
            self.request_batch_size(wanted, self.gradients.mode)

    def _switch_batch_size(self, batch_size: int) -> None:
        self.control.approved_batch_size = None
        self._requested_batch_size = None
        if batch_size != self._batch_size:
            self._batch_size = batch_size
            if self.gradients is not None:
                self.gradients.batch_size_changed()

    # Gangs.

    def init_process_group(self, backend: str | None = None) -> None:
        """Join this job's gang with torch.distributed (gloo on the CPU, nccl on CUDA)."""
        if self.world_size <= 1:
            return
        import datetime

        import torch.distributed as dist

        if dist.is_initialized():
            return
        env = self.environment
        dist.init_process_group(
            backend or ("nccl" if env.device.startswith("cuda") else "gloo"),
            init_method=f"tcp://{env.master_addr}:{env.master_port}",
            rank=env.rank,
            world_size=env.world_size,
            timeout=datetime.timedelta(seconds=60),
        )

    # Start and end.

    def _announce(self) -> None:
        if not self._started:
            self._started = True
            self.channel.send(
                Started(self.job_id or 0, self.step, self._batch_size, self.resumed_from_step)
            )

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None and not isinstance(error, KeyboardInterrupt | SystemExit):
            self.fail(f"{type(error).__name__}: {error}")
            return
        self.close()

    def fail(self, message: str) -> None:
        """End the run with an error (the job fails with this one-line reason)."""
        if self._ended:
            return
        self._ended = True
        first_line = message.strip().splitlines()[0] if message.strip() else "error"
        self.channel.send(Error(first_line))

    def close(self) -> None:
        """End the run: "done" when every step ran, else why it stopped."""
        if self._ended:
            return
        self._ended = True
        self._announce()
        total = self.total if self.total is not None else self.step
        reason: ExitReason = self.stopped or ("done" if self.step >= total else "preempted")
        self.channel.send(Exit(reason, self.step, total))


def gradient_sq_norm(model: Any) -> float:
    """The squared norm of a torch module's gradients (summed over its parameters)."""
    import torch

    total = torch.zeros(())
    for parameter in model.parameters():
        if parameter.grad is not None:
            total = total + parameter.grad.detach().pow(2).sum().cpu()
    return float(total)


def _agree_to_stop(stop: bool, expired: bool) -> tuple[bool, bool]:
    """Every rank of a gang stops at the same step (when torch.distributed is up)."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is None or not distributed.is_initialized():
        return stop, expired
    import torch

    flags = torch.tensor([float(stop), float(expired)])
    distributed.all_reduce(flags, op=distributed.ReduceOp.MAX)
    return bool(flags[0] > 0), bool(flags[1] > 0)


_current: Session | None = None


def session(
    batch_size: int | None = None,
    max_batch_size: int | None = None,
    checkpoint_dir: str | Path | None = None,
) -> Session:
    """This process's job session (the same one on every call).

    `batch_size`: the script's batch size (the scheduler's SHOCK_BATCH_SIZE overrides it);
    `max_batch_size`: the largest Accordion/GNS may ask for; `checkpoint_dir`: where a local
    session keeps checkpoints (default `./shock-checkpoints`; under shock the job's directory
    in the scheduler's state directory)."""
    global _current
    if _current is not None and not _current._ended:
        return _current
    environment = read_environment()
    channel: Channel
    if environment.channel_fds is None:
        channel = NullChannel()
    else:
        read_fd, write_fd = environment.channel_fds
        channel = StdioChannel(
            os.fdopen(write_fd, "w", buffering=1, closefd=False),
            os.fdopen(read_fd, "r", closefd=False),
        )
    directory = None
    if checkpoint_dir is not None and not environment.under_shock:
        directory = Path(checkpoint_dir)
    _current = Session(environment, channel, batch_size, max_batch_size, directory)
    if environment.under_shock:
        _stop_on_sigterm(_current)
    return _current


def _stop_on_sigterm(current: Session) -> None:
    """SIGTERM is the contract's preempt: stop at the next step boundary."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        current.control.preempt()
        if callable(previous) and previous not in (signal.SIG_IGN, signal.SIG_DFL):
            with contextlib.suppress(Exception):
                previous(signum, frame)

    signal.signal(signal.SIGTERM, on_sigterm)
