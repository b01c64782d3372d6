"""A backend's own options: declared as a dataclass, parsed from `--backend-option KEY=VALUE`
and from long options, converted to each field's type, carried to the backend by the
RunRequest; the grpc backend's options are its local cluster."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rich.console import Console
from shock_cli import run_shock

from shock.cli.backend_args import extra_option_items, peek_backend, print_backend_help
from shock.core.backend_options import declared_options, options_from_text, parse_option_items
from shock.core.errors import InputError, ShockError
from shock.core.hookspecs import Register, hookimpl
from shock.core.plugins import PluginRegistry, load_plugins
from shock.core.results import RunResult
from shock.core.run import ClusterRuntime, RunRequest
from shock.engine.runner import RunOptions, build_request
from shock.plugins.backends.grpc import GrpcBackend, GrpcOptions


@dataclass(frozen=True, slots=True)
class ProbeOptions:
    count: int = field(default=1, metadata={"help": "How many probes."})
    ratio: float = 0.5
    label: str = "x"
    verbose: bool = False
    out: Path | None = None
    limit: float | None = None
    seed: int = 0  # `shock run` has a --seed of its own

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError("--count must be >= 0")


class ProbeBackend:
    name = "probe"
    description = "test backend with one option of every type"
    options_type = ProbeOptions

    def run(self, request: RunRequest) -> RunResult:
        raise AssertionError("never run by these tests")


class _Plugin:
    def __init__(self, backend: object) -> None:
        self.backend = backend

    @hookimpl
    def register_backends(self, register: Register) -> None:
        register(self.backend)


PROBE = ProbeBackend()


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry(load_plugins(extra_plugins=[_Plugin(PROBE)]))


def _items(*items: str) -> ProbeOptions:
    options = options_from_text(PROBE, parse_option_items(items, "probe"))
    assert isinstance(options, ProbeOptions)
    return options


# Declaring and converting.


def test_declared_options_carry_type_default_and_help() -> None:
    options = {option.name: option for option in declared_options(PROBE)}
    assert list(options) == ["count", "ratio", "label", "verbose", "out", "limit", "seed"]
    count = options["count"]
    assert (count.flag, count.kind, count.optional, count.default, count.help) == (
        "--count", int, False, 1, "How many probes."
    )  # fmt: skip
    assert (options["out"].kind, options["out"].optional) == (Path, True)
    assert (options["limit"].kind, options["limit"].optional) == (float, True)
    assert declared_options(object()) == ()


def test_texts_convert_to_each_fields_type() -> None:
    options = _items("count=3", "ratio=0.25", "label=a b", "verbose=yes", "out=o/p", "limit=2")
    assert options == ProbeOptions(3, 0.25, "a b", True, Path("o/p"), 2.0)
    assert _items() == ProbeOptions()
    assert _items("verbose=off").verbose is False
    assert _items("--count=4").count == 4  # as the flag is spelled


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("count=x", "backend 'probe': option --count expects an integer, got 'x'"),
        ("ratio=fast", "backend 'probe': option --ratio expects a number, got 'fast'"),
        ("verbose=maybe", "backend 'probe': option --verbose expects true or false, got 'maybe'"),
        ("out=", "backend 'probe': option --out expects a path, got ''"),
        ("limit=none", "backend 'probe': option --limit expects a number, got 'none'"),
        ("count=-1", "backend 'probe': --count must be >= 0"),
        ("nope=1", "backend 'probe' has no option --nope (its options: --count, --ratio,"),
        ("count", "'count' is not KEY=VALUE (backend 'probe')"),
    ],
)
def test_bad_texts_name_backend_option_and_expected_type(item: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        _items(item)
    assert message in str(raised.value)


def test_an_option_given_twice_is_refused() -> None:
    with pytest.raises(InputError, match="option --count given twice"):
        _items("count=1", "count=2")


def test_unsupported_option_types_name_the_backend_and_option() -> None:
    @dataclass(frozen=True)
    class Listed:
        names: list[str] = field(default_factory=list)

    class Odd:
        name = "odd"
        options_type = Listed

    with pytest.raises(ShockError, match="backend 'odd': option 'names' has type list"):
        declared_options(Odd())

    class NotADataclass:
        name = "plain"
        options_type = dict

    with pytest.raises(ShockError, match="backend 'plain': options_type must be a dataclass"):
        declared_options(NotADataclass())


# Long options among `shock run`'s unknown arguments.


def test_long_options_become_items() -> None:
    args = ["--count", "3", "--ratio=0.25", "--verbose", "--limit", "-1", "--out", "x y"]
    assert extra_option_items(args, PROBE) == [
        "count=3", "ratio=0.25", "verbose=true", "limit=-1", "out=x y"
    ]  # fmt: skip
    assert extra_option_items(["--no-verbose"], PROBE) == ["verbose=false"]
    assert extra_option_items(["--verbose=no"], PROBE) == ["verbose=no"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--count"], "backend 'probe': option --count needs a value"),
        (["--count", "--ratio", "1"], "backend 'probe': option --count needs a value"),
        (["--round-lenght", "5"], "`shock run` has no option --round-lenght, and backend "
                                  "'probe' has no option --round-lenght (its options:"),
        (["--no-count"], "has no option --no-count"),
        (["stray"], "unexpected argument 'stray'"),
    ],
)  # fmt: skip
def test_bad_long_options(args: list[str], message: str) -> None:
    with pytest.raises(InputError) as raised:
        extra_option_items(args, PROBE)
    assert message in str(raised.value)


def test_peek_backend() -> None:
    assert peek_backend(["--policy", "fifo"]) == "simulator"
    assert peek_backend(["--backend", "grpc", "--help"]) == "grpc"
    assert peek_backend(["--backend=noisy", "--backend", "grpc"]) == "grpc"
    assert peek_backend(["--", "--backend", "grpc"]) == "simulator"


def test_help_section_lists_every_option() -> None:
    output = io.StringIO()
    print_backend_help(Console(file=output, width=200), PROBE, {"--seed", "--policy"})
    text = output.getvalue()
    assert "Options of backend 'probe'" in text
    lines = {line.split()[1]: " ".join(line.split()[2:]) for line in text.splitlines()[1:-1]}
    assert lines["--count"] == "<int> How many probes. [default: 1] │"
    assert lines["--verbose/--no-verbose"].startswith("[default: False]")
    assert lines["--out"] == "<path> │"  # no default shown for None
    # --seed is `shock run`'s own: the backend's seed is reachable through --backend-option.
    assert "--backend-option" in lines and "seed=…" in lines["--backend-option"]


# Through the request.


def test_request_carries_the_parsed_options(registry: PluginRegistry) -> None:
    options = RunOptions(backend="probe", backend_options=("count=2", "label=y"))
    request = build_request(options, registry)
    assert request.backend_options == ProbeOptions(count=2, label="y")
    assert request.backend_options_as(ProbeOptions).count == 2
    # A typed instance is taken as it is; the defaults when none are given.
    typed = ProbeOptions(count=5)
    assert build_request(RunOptions(backend="probe", backend_options=typed), registry)\
        .backend_options is typed  # fmt: skip
    assert build_request(RunOptions(backend="probe"), registry).backend_options == ProbeOptions()
    # Options of no interest to the run's settings leave them alone.
    assert request.cluster == build_request(RunOptions(), registry).cluster


def test_request_refuses_options_of_another_type(registry: PluginRegistry) -> None:
    with pytest.raises(ShockError, match="backend 'probe': options must be KEY=VALUE texts"):
        build_request(RunOptions(backend="probe", backend_options=GrpcOptions()), registry)
    request = build_request(RunOptions(backend="probe"), registry)
    with pytest.raises(ShockError, match="are a ProbeOptions, not a GrpcOptions"):
        request.backend_options_as(GrpcOptions)


def test_simulator_has_no_options(registry: PluginRegistry) -> None:
    request = build_request(RunOptions(), registry)
    assert request.backend_options is None
    assert request.backend_options_as(ProbeOptions) == ProbeOptions()
    with pytest.raises(InputError, match=r"backend 'simulator' has no option --count \(it"):
        build_request(RunOptions(backend_options=("count=1",)), registry)


# The grpc backend's options.


def test_grpc_declares_the_documented_run_options() -> None:
    flags = [option.flag for option in declared_options(GrpcBackend())]
    assert flags == ["--local-workers", "--gpus-per-worker", "--gpu-type", "--job-command",
                     "--state-dir", "--heartbeat", "--checkpoint-every", "--dead-after",
                     "--min-workers", "--host", "--port"]  # fmt: skip


def test_grpc_local_workers_are_the_cluster_and_build_the_runtime(tmp_path: Path) -> None:
    # Keys spelled as fields or as flags.
    texts = ("local_workers=3", "gpus-per-worker=1", "gpu_type=p100", f"state_dir={tmp_path}",
             "job_command=python job.py --name 'a b'", "heartbeat=0.5", "checkpoint-every=4")
    request = build_request(RunOptions(backend="grpc", backend_options=texts))
    assert request.cluster.gpus_per_type == {"p100": 3}
    assert [server.num_gpus for server in request.cluster.servers()] == [1, 1, 1]
    assert request.config.mechanism.round_length_s == 30.0  # a local run's default
    assert request.config.cluster_runtime == ClusterRuntime(
        job_command=("python", "job.py", "--name", "a b"),
        state_dir=str(tmp_path),
        heartbeat_s=0.5,
        checkpoint_every_s=4.0,
    )
    assert isinstance(request.backend_options, GrpcOptions)


def test_grpc_defaults_and_an_explicit_round_length() -> None:
    request = build_request(RunOptions(backend="grpc", round_length_s=10.0))
    assert request.cluster.gpus_per_type == {"v100": 4}
    assert [server.num_gpus for server in request.cluster.servers()] == [2, 2]
    assert request.config.mechanism.round_length_s == 10.0
    assert request.config.cluster_runtime == ClusterRuntime()


def test_grpc_serve_mode_takes_the_cluster_from_its_workers(tmp_path: Path) -> None:
    """`local_workers=0` (what `shock serve` runs): no local cluster is made up, and the
    runtime's settings come from the same options as a local run's."""
    texts = ("local_workers=0", f"state_dir={tmp_path}", "heartbeat=0.5", "dead_after=7",
             "min_workers=2")  # fmt: skip
    request = build_request(RunOptions(backend="grpc", cluster="k80=3", backend_options=texts))
    assert request.cluster.gpus_per_type == {"k80": 3}  # the types to expect, as named
    options = request.backend_options_as(GrpcOptions)
    assert options.serves
    settings = options.runtime_settings(request.config.cluster_runtime, tmp_path, 0, True)
    assert (settings.heartbeat_s, settings.dead_after_s, settings.min_workers) == (0.5, 7.0, 2)
    assert settings.accepts_submissions
    local = GrpcOptions(heartbeat=2.0).runtime_settings(ClusterRuntime(heartbeat_s=2.0),
                                                        tmp_path, 3)  # fmt: skip
    assert (local.dead_after_s, local.min_workers) == (10.0, 3)  # 5 heartbeats; every worker
    with pytest.raises(ShockError, match="shock serve"):
        GrpcBackend().run(request)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("local_workers=-1", "backend 'grpc': --local-workers must be >= 0"),
        ("gpus_per_worker=0", "--gpus-per-worker >= 1"),
        ("dead_after=0", "backend 'grpc': --dead-after must be > 0"),
        ("min_workers=0", "backend 'grpc': --min-workers must be >= 1"),
        ("port=70000", "backend 'grpc': --port must be 0 to 65535, got 70000"),
        ("job_command=python 'unclosed", "backend 'grpc': --job-command: cannot split"),
        ("heartbeat=0", "backend 'grpc': --heartbeat must be > 0"),
        ("checkpoint_every=-1", "backend 'grpc': --checkpoint-every must be > 0"),
        ("gpus_per_worker=two", "option --gpus-per-worker expects an integer, got 'two'"),
    ],
)
def test_grpc_bad_options(item: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        build_request(RunOptions(backend="grpc", backend_options=(item,)))
    assert message in str(raised.value)


# Through the command line.


def test_run_help_with_grpc_lists_its_options(tmp_path: Path) -> None:
    result = run_shock("run", "--backend", "grpc", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    section = result.stdout[result.stdout.index("Options of backend 'grpc'") :]
    for option in declared_options(GrpcBackend()):
        assert option.flag in section
    assert "Local worker agents to start" in " ".join(section.split())


def test_a_grpc_option_with_the_simulator_is_a_clear_error(tmp_path: Path) -> None:
    result = run_shock("run", "--local-workers", "2", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "backend 'simulator' has no option --local-workers" in " ".join(result.stderr.split())


def test_grpc_runs_on_the_named_cluster_unless_workers_are_given(tmp_path: Path) -> None:
    """--cluster names the servers (one local worker each, a cluster file's with their CPUs
    and memory); worker options replace it; a runtime built in code is kept."""
    runtime = ClusterRuntime(job_command=("python", "job.py"), heartbeat_s=0.2)
    named = build_request(
        RunOptions(backend="grpc", cluster="synergy-128", cluster_runtime=runtime)
    )
    assert named.cluster.name == "synergy-128" and named.cluster.has_server_resources
    assert named.config.cluster_runtime == runtime
    replaced = build_request(
        RunOptions(backend="grpc", cluster="synergy-128", backend_options=("local_workers=1",))
    )
    assert replaced.cluster.gpus_per_type == {"v100": 2}
    assert [server.num_gpus for server in replaced.cluster.servers()] == [2]
