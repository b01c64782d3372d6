"""What a job does at every iteration boundary, whoever runs the loop (a person's script
through `shock.job.Session`, or the built-in training harness): apply the agent's commands,
decide whether to stop (preempted, agent gone, lease run out), ask for a lease renewal when
the lease is nearly over, and keep the clocks for progress reports and periodic checkpoints.

One class, so every job speaks the contract the same way (docs/workloads.md, "Running a
job"). It imports no torch and costs a few microseconds per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from shock.job.channel import Channel
from shock.job.lease import Lease
from shock.job.messages import BatchSizeApproval, LeaseGrant, LeaseRequest, Preempt


class JobControl:
    def __init__(
        self,
        channel: Channel,
        clock: Callable[[], float] = time.monotonic,
        report_every_s: float = 1.0,
        checkpoint_every_s: float = 10.0,
    ) -> None:
        self.channel = channel
        self.clock = clock
        self.report_every_s = report_every_s
        self.checkpoint_every_s = checkpoint_every_s
        self.lease = Lease()
        self.preempt_requested = False
        # A batch size the agent approved, to take effect at the next boundary.
        self.approved_batch_size: int | None = None
        self.last_checkpoint_step: int | None = None
        self.last_checkpoint_time = 0.0
        # The current reporting interval: when it began and the step then.
        self.report_time = 0.0
        self.report_step = 0
        self._first_step = True

    def preempt(self) -> None:
        """Stop at the next boundary (safe to call from a signal handler)."""
        self.preempt_requested = True

    def start(
        self, step: int, lease_steps: int | None, lease_s: float | None, launched_at: float | None
    ) -> None:
        """The loop begins at `step`; the initial lease counts from `launched_at` (the process
        start: start-up is inside the lease the agent granted)."""
        now = self.clock()
        if lease_steps is not None or lease_s is not None:
            lease_start = now if launched_at is None else min(launched_at, now)
            self.lease.grant(lease_steps, lease_s, step, lease_start)
        self.last_checkpoint_time = now
        self.report_time, self.report_step = now, step
        self._first_step = True

    def receive(self, step: int) -> None:
        """Apply the commands that arrived since the last boundary."""
        for command in self.channel.receive():
            if isinstance(command, Preempt):
                self.preempt_requested = True
            elif isinstance(command, LeaseGrant):
                self.lease.grant(command.steps, command.seconds, step, self.clock())
            elif isinstance(command, BatchSizeApproval):
                self.approved_batch_size = command.batch_size

    def must_stop(self, step: int, now: float) -> tuple[bool, bool]:
        """(stop, expired): preempted or cut off from the agent; the lease ran out. Without
        its agent the job saves its progress and stops (it could only run on until its lease
        ran out, holding the device for no one)."""
        stop = self.preempt_requested or not self.channel.connected()
        return stop, self.lease.expired(step, now)

    def renew_if_near(self, step: int, now: float) -> None:
        """One lease request per lease, when at most 10% of it is left."""
        if self.lease.wants_renewal(step, now):
            self.channel.send(LeaseRequest(step))
            self.lease.renewal_requested = True

    def stepped(self, step: int, now: float) -> None:
        """A step ended at `now`. The first one pays one-time costs (allocator, lazy init):
        the throughput the scheduler learns starts after it."""
        if self._first_step:
            self.report_time, self.report_step, self._first_step = now, step, False

    def report_due(self, now: float) -> bool:
        return now - self.report_time >= self.report_every_s

    def take_rate(self, step: int, now: float) -> float | None:
        """Steps/s over the current interval, which then starts afresh; None: no step in it."""
        steps = step - self.report_step
        if steps <= 0:
            return None
        rate = steps / max(now - self.report_time, 1e-9)
        self.report_time, self.report_step = now, step
        return rate

    def checkpoint_due(self, now: float) -> bool:
        return now - self.last_checkpoint_time >= self.checkpoint_every_s

    def checkpointed(self, step: int, now: float) -> None:
        self.last_checkpoint_step = step
        self.last_checkpoint_time = now
