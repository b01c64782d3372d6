"""Elastic rounds: jobs on the GPU count, nodes and batch size an elastic policy grants.

When an allocation carries `elastic` grants (Pollux, Sia, and the baselines of Pollux's
artifact), the round is not selected from time shares: each granted job runs as a gang of
the grant's GPUs on one worker type, placed here, and the rest wait.

Placement, in three passes so that jobs that stay put keep their GPUs:

1. a job granted what it ran on last round keeps its GPUs (the same GPUs per server where
   the grant names its nodes, else the same GPU count on that type);
2. a grant that names its nodes (`node_gpus`: GPUs on the k-th server of the type) takes
   free GPUs on those servers, its old GPUs there first;
3. the rest, and any grant whose nodes are taken, fill the servers with the most free GPUs
   first (as Pollux's artifact places Optimus and Tiresias).

A grant that finds too few free GPUs does not run this round; no GPU is ever given twice.
A job not marked elastic keeps its scale factor: it runs when its grant gives at least that
many GPUs, on that many.

A job of one of Pollux's measured applications progresses at its goodput on the placement
and batch size it runs with (shock.goodput.progress: its measured step time there, as
Pollux's and Sia's simulators interpolate it (shock.goodput.measured), else the step-time
model's, x the gain of its batch size, epoch by epoch), on each GPU type by the run's
measurements of that type where it has them (`--goodput-profiles`: shock.goodput.profiles,
with Sia's calibration unless `--no-goodput-calibration`); its planned rate is the round's
mean progress per second in its trace's steps. Other jobs run at the throughput table's rate
for their GPU count (scaled linearly from their scale factor where the table lacks that
count). A job whose GPUs changed since last round restarts from a checkpoint: the engine's
(re)start overhead rules charge it (`--preemption-overhead`; the pollux preset: 30 s, also
at a job's first start).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from shock.core.policy import ElasticGrant, UnitKey
from shock.core.run import MechanismConfig
from shock.core.throughputs import ThroughputTable
from shock.engine.units import Assignment, JobState
from shock.goodput.measured import step_seconds_measured
from shock.goodput.model import GoodputModel, GradParams
from shock.goodput.profiles import read_profiles
from shock.goodput.progress import (
    Configuration,
    TrainingCurve,
    curve,
    fixed_batch_configuration,
)
from shock.goodput.speedup import application_of


def curve_of(job_type: str) -> TrainingCurve | None:
    """The training curve of the Pollux application a job type names, or None."""
    name = application_of(job_type)
    return None if name is None else curve(name)


class ElasticRounds:
    """Places granted jobs and prices their rounds; remembers each job's batch size."""

    def __init__(
        self,
        worker_types: tuple[str, ...],
        servers_by_column: list[list[list[int]]],
        table: Callable[[], ThroughputTable],
        config: MechanismConfig,
    ) -> None:
        self.worker_types = worker_types
        # The run's per-GPU-type measurements (the bundled curves for every type without).
        self.profiles = read_profiles(config.goodput_profiles) if config.goodput_profiles else None
        self.servers_by_column = servers_by_column
        self.table_of = table  # the mechanism's table (a resize may replace it)
        self.config = config
        self.server_of_gpu: dict[int, tuple[int, int]] = {
            gpu: (column, index)
            for column, servers in enumerate(servers_by_column)
            for index, server in enumerate(servers)
            for gpu in server
        }
        # Job id -> the batch size it runs with (for jobs whose batch size is known).
        self.batch_sizes: dict[int, int] = {}
        # Seconds a job that moved loses to its restart (the engine's overhead, which it
        # charges; here it only shortens the stretch a round's mean rate is taken over).
        self.restart_s = 0.0

    def plan(
        self,
        grants: Mapping[UnitKey, ElasticGrant],
        active: Mapping[int, JobState],
        previous_round: Mapping[UnitKey, Assignment],
    ) -> list[Assignment]:
        free = [
            [list(server) for server in servers] for servers in self.servers_by_column
        ]  # per column, per server: its free GPUs in order
        wanted: list[tuple[JobState, int, int, ElasticGrant]] = []
        for key in sorted(grants, key=_key_order):
            job = active.get(key) if not isinstance(key, tuple) else None
            grant = grants[key]
            if job is None or grant.worker_type not in self.worker_types or grant.gpus < 1:
                continue
            gpus = grant.gpus
            if not job.spec.elastic:
                if gpus < job.scale_factor:
                    continue
                gpus = job.scale_factor
            wanted.append((job, self.worker_types.index(grant.worker_type), gpus, grant))
        placed: dict[int, tuple[int, ...]] = {}
        kept: set[int] = set()
        # 1. Jobs that keep last round's GPUs.
        for job, column, gpus, grant in wanted:
            last = previous_round.get(job.key)
            if last is None or last.column != column or len(last.gpus) != gpus:
                continue
            if grant.node_gpus and self._layout(last.gpus, column) != _trimmed(grant.node_gpus):
                continue
            if self._take_exactly(free, column, last.gpus):
                placed[job.job_id] = last.gpus
                kept.add(job.job_id)
        # 2. Grants that name their nodes.
        for job, column, gpus, grant in wanted:
            if job.job_id in placed or not grant.node_gpus or sum(grant.node_gpus) != gpus:
                continue
            last = previous_round.get(job.key)
            before = set(last.gpus) if last is not None else set()
            taken = self._take_on_nodes(free, column, grant.node_gpus, before)
            if taken is not None:
                placed[job.job_id] = taken
        # 3. The rest, on the servers with the most free GPUs first.
        for job, column, gpus, _ in wanted:
            if job.job_id not in placed:
                taken = self._take_most_free(free, column, gpus)
                if taken is not None:
                    placed[job.job_id] = taken
        assignments = []
        batch_sizes: dict[int, int] = {}
        for job, column, _, grant in wanted:
            gpus_held = placed.get(job.job_id)
            if gpus_held is None:
                continue
            is_kept = job.job_id in kept
            rate, batch = self._rate(job, column, gpus_held, grant, is_kept)
            if batch is not None:
                batch_sizes[job.job_id] = batch
            assignments.append(
                Assignment(job, column, self.worker_types[column], gpus_held, (rate,), is_kept)
            )
        self.batch_sizes = batch_sizes
        return assignments

    # Placement.

    def _layout(self, gpus: tuple[int, ...], column: int) -> tuple[int, ...]:
        """GPUs per server of a worker type (by server index), trailing zeros dropped."""
        counts = [0] * len(self.servers_by_column[column])
        for gpu in gpus:
            counts[self.server_of_gpu[gpu][1]] += 1
        return _trimmed(tuple(counts))

    def _take_exactly(
        self, free: list[list[list[int]]], column: int, gpus: tuple[int, ...]
    ) -> bool:
        """Take these GPUs if every one is free."""
        where = [self.server_of_gpu.get(gpu) for gpu in gpus]
        if any(w is None or w[0] != column for w in where):
            return False
        servers = free[column]
        if not all(gpu in servers[w[1]] for gpu, w in zip(gpus, where, strict=True) if w):
            return False
        for gpu, w in zip(gpus, where, strict=True):
            if w is not None:
                servers[w[1]].remove(gpu)
        return True

    def _take_on_nodes(
        self,
        free: list[list[list[int]]],
        column: int,
        node_gpus: tuple[int, ...],
        before: set[int],
    ) -> tuple[int, ...] | None:
        servers = free[column]
        if len(_trimmed(node_gpus)) > len(servers):
            return None
        if any(len(servers[k]) < count for k, count in enumerate(node_gpus) if count):
            return None
        taken: list[int] = []
        for k, count in enumerate(node_gpus):
            if not count:
                continue
            ordered = sorted(servers[k], key=lambda gpu: (gpu not in before, gpu))
            chosen = ordered[:count]
            for gpu in chosen:
                servers[k].remove(gpu)
            taken.extend(chosen)
        return tuple(sorted(taken))

    @staticmethod
    def _take_most_free(
        free: list[list[list[int]]], column: int, gpus: int
    ) -> tuple[int, ...] | None:
        servers = free[column]
        if sum(map(len, servers)) < gpus:
            return None
        taken: list[int] = []
        while len(taken) < gpus:
            index = max(range(len(servers)), key=lambda k: (len(servers[k]), -k))
            count = min(len(servers[index]), gpus - len(taken))
            taken.extend(servers[index][:count])
            del servers[index][:count]
        return tuple(sorted(taken))

    # Rates.

    def _rate(
        self,
        job: JobState,
        column: int,
        gpus: tuple[int, ...],
        grant: ElasticGrant,
        kept: bool,
    ) -> tuple[float, int | None]:
        """Steps/s of the job this round on these GPUs, and the batch size it runs with."""
        replicas = len(gpus)
        measured = self._measured_curve(job.spec.job_type, self.worker_types[column])
        training = measured or curve_of(job.spec.job_type)
        if training is None:
            rate = self.table_of().throughput(
                job.spec.job_type, replicas, self.worker_types[column]
            )
            if rate <= 0:
                rate = job.rates[column] * replicas / max(job.scale_factor, 1)
            return rate, job.spec.batch_size
        per_server: dict[int, int] = {}
        for gpu in gpus:
            server = self.server_of_gpu[gpu][1]
            per_server[server] = per_server.get(server, 0) + 1
        nodes = len(per_server)
        config = self._configuration(job, training, nodes, replicas, grant)
        # Step times as the simulators whose measurements these are read them: on a GPU type
        # the run's profiles measured, theirs (Sia's: interpolated, calibrated; None where they
        # do not reach: the curve's fitted model); else Pollux's bundled ones.
        node_gpus = tuple(per_server.values())
        if measured is not None:
            assert self.profiles is not None
            step_s = self.profiles.step_seconds(
                training.name,
                self.worker_types[column],
                node_gpus,
                config,
                self.config.goodput_calibration,
            )
        else:
            step_s = step_seconds_measured(training.name, node_gpus, config)
        available = self.config.round_length_s
        if not kept:
            available = max(available - self.restart_s, 1e-9)
        total = job.total_steps
        progress = job.steps_done / total * training.target if total > 0 else 0.0
        made, used = training.advance(progress, config, available, step_s)
        if made <= 0 or used <= 0:
            per_second = training.goodput(config, training.epoch_at(progress), step_s)
        else:
            per_second = made / used
        return max(per_second, 1e-12) * total / training.target, config.batch_size

    def _measured_curve(self, job_type: str, worker_type: str) -> TrainingCurve | None:
        """The job's curve on this GPU type by the run's profiles, where they measured it."""
        name = application_of(job_type)
        if name is None or self.profiles is None:
            return None
        return self.profiles.curve(name, worker_type, self.config.goodput_calibration)

    def _configuration(
        self,
        job: JobState,
        training: TrainingCurve,
        nodes: int,
        replicas: int,
        grant: ElasticGrant,
    ) -> Configuration:
        """The grant's batch split where it fits these GPUs; its total batch size split as
        Pollux's simulator splits a fixed one; the trace's batch size for a job that is not
        elastic; else the batch size of highest goodput here."""
        limits = training.limits
        if not job.spec.elastic:
            batch = job.spec.batch_size or limits.init_batch_size
            return fixed_batch_configuration(limits, nodes, replicas, batch)
        if (
            grant.atomic_batch_size is not None
            and grant.gpus == replicas
            and grant.atomic_batch_size >= 1
        ):
            return Configuration(nodes, replicas, grant.atomic_batch_size, grant.accumulation_steps)
        if grant.batch_size is not None:
            return fixed_batch_configuration(limits, nodes, replicas, grant.batch_size)
        epoch = training.epoch_at(job.steps_done / max(job.total_steps, 1) * training.target)
        sqr, var = training.grad_stats(limits.init_batch_size, epoch)
        model = GoodputModel(training.perf, GradParams(sqr, var), limits)
        best = model.best_config(nodes, replicas)
        atomic = int(best.atomic_bsz[0])
        if atomic < 1:
            return fixed_batch_configuration(limits, nodes, replicas, limits.init_batch_size)
        return Configuration(nodes, replicas, atomic, int(best.accum_steps[0]))


def _trimmed(counts: tuple[int, ...]) -> tuple[int, ...]:
    end = len(counts)
    while end and counts[end - 1] == 0:
        end -= 1
    return counts[:end]


def _key_order(key: UnitKey) -> tuple[int, int]:
    return (key[0], key[1]) if isinstance(key, tuple) else (key, -1)
