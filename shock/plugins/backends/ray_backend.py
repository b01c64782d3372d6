"""The `ray` backend: real jobs (the gRPC cluster's workloads and harness) on a Ray cluster,
one actor per job lease in a placement group of the gang's GPUs: the cluster runtime with its
Ray adapter (`shock/cluster/ray_transport.py`). The driver needs only the `ray` extra.

`--ray-address local` (the default) starts a single-node Ray instance on this machine that
declares `--local-gpus` as custom resources (jobs then run on the CPU); `--ray-address
HOST:PORT` joins an existing cluster, whose nodes declare their GPUs as resources named by
worker type (`ray start --resources '{"v100": 4}'`).
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from shock.api import ClusterRuntime, Register, RunRequest, RunResult, ShockError, hookimpl
from shock.cluster.defaults import DEFAULT_JOB_COMMAND
from shock.cluster.ray_nodes import is_worker_type, parse_local_gpus
from shock.plugins.backends.grpc import LOCAL_ROUND_LENGTH_S, _sigterm_as_interrupt

if TYPE_CHECKING:
    from shock.api import RunOptions

LOCAL_ADDRESS = "local"
DEFAULT_LOCAL_GPUS = "v100=2,k80=2"
INSTALL_HINT = "pip install 'shock[ray]'"


@dataclass(frozen=True, slots=True)
class RayOptions:
    """`shock run --backend ray` options."""

    ray_address: str = field(
        default=LOCAL_ADDRESS,
        metadata={"help": "'local': start a Ray instance on this machine with --local-gpus; "
                          "HOST:PORT (or 'auto'): join that Ray cluster."},
    )  # fmt: skip
    local_gpus: str | None = field(
        default=None,
        metadata={"help": "Simulated GPUs of a local Ray instance, TYPE=COUNT,... (custom "
                          f"resources; jobs run on the CPU; default {DEFAULT_LOCAL_GPUS})."},
    )  # fmt: skip
    local_cpus: int | None = field(
        default=None, metadata={"help": "CPUs a local Ray instance declares (default: all)."}
    )
    gpu_types: str | None = field(
        default=None,
        metadata={"help": "Ray resources that are worker types, TYPE,... (default: every "
                          "custom resource of whole units)."},
    )  # fmt: skip
    job_command: str | None = field(
        default=None,
        metadata={"help": "Command that runs one job (default: python -m shock.workloads.run)."},
    )
    state_dir: Path | None = field(
        default=None,
        metadata={"help": "Journal, checkpoints and logs; every node must see it (default: "
                          "a temporary directory, for a local instance)."},
    )  # fmt: skip
    checkpoint_every: float | None = field(
        default=None, metadata={"help": "Jobs checkpoint at least this often (s)."}
    )

    def __post_init__(self) -> None:
        if not self.ray_address.strip():
            raise ValueError("--ray-address: give 'local', 'auto' or HOST:PORT")
        if self.local_gpus is not None:
            if not self.is_local:
                raise ValueError("--local-gpus applies only to --ray-address local")
            parse_local_gpus(self.local_gpus)
        if self.local_cpus is not None and self.local_cpus < 1:
            raise ValueError("--local-cpus must be >= 1")
        if self.checkpoint_every is not None and not self.checkpoint_every > 0:
            raise ValueError("--checkpoint-every must be > 0")
        for name in self.worker_types() or ():
            if not is_worker_type(name):
                raise ValueError(f"--gpu-types: '{name}' cannot be a worker type")
        self.job_command_parts()

    @property
    def is_local(self) -> bool:
        return self.ray_address.strip() == LOCAL_ADDRESS

    def local_gpu_counts(self) -> dict[str, int]:
        return parse_local_gpus(self.local_gpus or DEFAULT_LOCAL_GPUS)

    def worker_types(self) -> frozenset[str] | None:
        """The resources named by --gpu-types; a local instance's are its --local-gpus."""
        if self.gpu_types:
            return frozenset(t.strip() for t in self.gpu_types.split(",") if t.strip())
        if self.is_local:
            return frozenset(self.local_gpu_counts())
        return None

    def job_command_parts(self) -> tuple[str, ...]:
        from shock.plugins.backends.grpc import GrpcOptions

        return GrpcOptions(job_command=self.job_command).job_command_parts()

    def adjust_run(self, run: RunOptions) -> RunOptions:
        """Rounds default to LOCAL_ROUND_LENGTH_S; a local instance's GPUs are the cluster
        (the engine plans on the cluster Ray reports once the run starts)."""
        base = run.cluster_runtime or ClusterRuntime()
        run = replace(
            run,
            round_length_s=(
                LOCAL_ROUND_LENGTH_S if run.round_length_s is None else run.round_length_s
            ),
            cluster_runtime=ClusterRuntime(
                job_command=self.job_command_parts() or base.job_command,
                state_dir=str(self.state_dir) if self.state_dir else base.state_dir,
                heartbeat_s=base.heartbeat_s,
                checkpoint_every_s=(
                    base.checkpoint_every_s
                    if self.checkpoint_every is None
                    else self.checkpoint_every
                ),
            ),
        )
        if not self.is_local:
            return run
        counts = self.local_gpu_counts()
        return replace(
            run,
            cluster=",".join(f"{name}={count}" for name, count in counts.items()),
            gpus_per_server=max(counts.values()),
        )


def import_ray() -> None:
    """Ray, or a one-line error naming the extra that installs it."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ShockError(f"the ray backend needs Ray: {INSTALL_HINT}") from None


def connect(options: RayOptions) -> bool:
    """Start a local Ray instance or join a cluster; True if this call started Ray (and the
    run must shut it down)."""
    import ray

    if ray.is_initialized():
        return False  # the caller's own Ray session (a test, a notebook)
    try:
        if options.is_local:
            ray.init(
                address=LOCAL_ADDRESS,
                resources={name: float(n) for name, n in options.local_gpu_counts().items()},
                num_cpus=options.local_cpus,
                include_dashboard=False,
                # The node talks over loopback; Ray's ports still listen on every interface,
                # guarded by the token Ray requires of a new instance.
                _node_ip_address="127.0.0.1",
                logging_level=logging.WARNING,
                log_to_driver=False,
            )
        else:
            ray.init(
                address=options.ray_address.strip(),
                logging_level=logging.WARNING,
                log_to_driver=False,
            )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ShockError(f"cannot reach Ray at {options.ray_address}: {exc}") from None
    return True


class RayBackend:
    name = "ray"
    description = "real jobs as Ray actors on a Ray cluster (worker types as custom resources)"
    simulates_jobs = False
    options_type = RayOptions

    def run(self, request: RunRequest) -> RunResult:
        import_ray()
        import ray

        from shock.cluster.ray_transport import RaySettings, RayTransport
        from shock.cluster.runtime.runtime import Runtime
        from shock.cluster.runtime.state import RuntimeSettings

        options = request.backend_options_as(RayOptions)
        runtime = request.config.cluster_runtime
        with tempfile.TemporaryDirectory(prefix="shock-ray-") as scratch:
            state_dir = Path(runtime.state_dir) if runtime.state_dir else Path(scratch)
            (state_dir / "logs").mkdir(parents=True, exist_ok=True)
            types = options.worker_types()
            settings = RuntimeSettings(
                state_dir=state_dir,
                heartbeat_s=runtime.heartbeat_s,
                # A local instance is one node with every type; a cluster, any node at all.
                min_workers=len(types) if options.is_local and types else 1,
            )
            ray_settings = RaySettings(
                job_command=runtime.job_command or DEFAULT_JOB_COMMAND,
                log_dir=state_dir / "logs",
                checkpoint_every_s=runtime.checkpoint_every_s,
                gpu_types=types,
            )
            started = connect(options)
            scheduler = None
            try:
                with _sigterm_as_interrupt():
                    scheduler = Runtime(request, settings, RayTransport(ray_settings))
                    return scheduler.run()
            except KeyboardInterrupt:
                raise ShockError(
                    "interrupted: the run's Ray actors and their jobs were stopped"
                ) from None
            finally:
                if scheduler is not None:
                    scheduler.stop()
                    scheduler.journal.close()
                if started:
                    ray.shutdown()


@hookimpl
def register_backends(register: Register) -> None:
    register(RayBackend())
