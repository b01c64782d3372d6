"""`/metrics` on the dashboard's port: the service's state in Prometheus' text format, with
the official client library. Read-only, no token: it says what the dashboard shows.

Every scrape reads the scheduler afresh (a custom collector, no background sampling):
workers and GPUs by state, jobs by state and user, the queue's length, each user's shares,
rounds and the policy's decision times.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from shock.cluster.fairness import UserShare
from shock.cluster.runtime.runtime import Runtime

JOB_STATES = ("queued", "running", "done", "cancelled", "failed")


class SchedulerCollector(Collector):
    def __init__(self, scheduler: Runtime) -> None:
        self.scheduler = scheduler

    def collect(self) -> Iterator[Metric]:
        scheduler = self.scheduler
        shares = scheduler.user_shares()
        with scheduler.lock:  # one consistent view; the lock is re-entrant
            workers = [(w.gpu_type, w.gpus, w.registered and w.alive)
                       for w in scheduler.workers.values()]  # fmt: skip
            jobs = Counter(
                (scheduler._state(job), job.spec.entity or "") for job in scheduler.jobs.values()
            )
            busy = Counter(
                scheduler.workers[run.worker_id].gpu_type
                for run in scheduler.runs.values()
                if run.ended_at is None and run.worker_id in scheduler.workers
                for _ in run.gpus
            )
            times = scheduler.round_times
            round_index = scheduler._round_index

        alive = GaugeMetricFamily("shock_workers", "Workers by state.", labels=["state"])
        alive.add_metric(["alive"], sum(1 for *_, up in workers if up))
        alive.add_metric(["lost"], sum(1 for *_, up in workers if not up))
        yield alive

        gpus = GaugeMetricFamily("shock_gpus", "GPUs of live workers by type and state.",
                                 labels=["gpu_type", "state"])  # fmt: skip
        per_type: Counter[str] = Counter()
        for gpu_type, count, up in workers:
            if up:
                per_type[gpu_type] += count
        for gpu_type, total in sorted(per_type.items()):
            held = min(busy.get(gpu_type, 0), total)
            gpus.add_metric([gpu_type, "busy"], held)
            gpus.add_metric([gpu_type, "idle"], total - held)
        yield gpus

        by_state = GaugeMetricFamily("shock_jobs", "Jobs by state and user.",
                                     labels=["state", "user"])  # fmt: skip
        for (state, user), count in sorted(jobs.items()):
            by_state.add_metric([state, user], count)
        yield by_state

        queue = GaugeMetricFamily("shock_queue_length", "Jobs queued (waiting for GPUs).")
        queue.add_metric([], sum(count for (state, _), count in jobs.items() if state == "queued"))
        yield queue

        yield from _share_metrics(shares)

        current = GaugeMetricFamily("shock_round", "The round the policy planned last.")
        current.add_metric([], round_index)
        yield current
        rounds = CounterMetricFamily("shock_rounds", "Rounds carried out.")
        rounds.add_metric([], times.rounds)
        yield rounds
        round_s = CounterMetricFamily("shock_round_seconds", "Seconds spent in rounds.")
        round_s.add_metric([], times.round_seconds_total)
        yield round_s
        last_round = GaugeMetricFamily("shock_last_round_seconds", "The last round's length.")
        last_round.add_metric([], times.last_round_s)
        yield last_round
        decisions = CounterMetricFamily(
            "shock_decision_seconds",
            "Seconds from a round's report to the next round's plan (the policy deciding).",
        )
        decisions.add_metric([], times.decision_seconds_total)
        yield decisions
        last_decision = GaugeMetricFamily("shock_last_decision_seconds",
                                          "The last decision's time.")  # fmt: skip
        last_decision.add_metric([], times.last_decision_s)
        yield last_decision


def _share_metrics(shares: list[UserShare]) -> Iterator[Metric]:
    held = GaugeMetricFamily("shock_user_gpus", "GPUs each user's jobs hold now.", labels=["user"])
    share = GaugeMetricFamily(
        "shock_user_share",
        "Each user's share: of the GPUs now, of the GPU time over the last hour and since "
        "the start.",
        labels=["user", "window"],
    )
    fair = GaugeMetricFamily(
        "shock_user_fair_share", "Each user's weighted fair share over the same windows.",
        labels=["user", "window"],
    )  # fmt: skip
    used = CounterMetricFamily("shock_user_gpu_seconds", "GPU-seconds each user's jobs held.",
                               labels=["user"])  # fmt: skip
    for user in shares:
        held.add_metric([user.user], user.gpus)
        for window, part_share, part_fair in (
            ("now", user.share, user.fair_share),
            ("hour", user.recent.share, user.recent.fair_share),
            ("since_start", user.since_start.share, user.since_start.fair_share),
        ):
            share.add_metric([user.user, window], part_share)
            fair.add_metric([user.user, window], part_fair)
        used.add_metric([user.user], user.since_start.gpu_seconds)
    yield from (held, share, fair, used)


def metrics_registry(scheduler: Runtime) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SchedulerCollector(scheduler))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
