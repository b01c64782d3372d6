"""sia as its artifact runs it: per-GPU-type profiles read from a folder (small synthetic
files written here, not Sia's data), bootstrapping, restore pinning, per-type node sizes,
the restart discount, the preset, and the reader's errors."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shock_cli import run_shock

from shock.core.errors import InputError
from shock.core.plugins import default_registry
from shock.core.policy import PolicyInput, PolicyJob
from shock.core.solver import SolverSpec
from shock.engine.runner import RunOptions, build_request
from shock.goodput.profiles import read_profiles
from shock.plugins.policies.sia import Sia, SiaOptions, configurations
from shock.plugins.policies.sia.policy import restart_factor

SETTINGS: Any = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
TYPES = ("a100", "t4")
NODE_GPUS = "a100:8,t4:4"


def write_profiles(root: Path, speed: dict[str, float] | None = None) -> Path:
    """A folder laid out as Sia's `traces`: cifar10 measured on `aws` (T4) and `dgx-ext`
    (A100); `speed` divides each type's step times (the A100 3x faster by default)."""
    speed = speed or {"aws": 1.0, "dgx-ext": 3.0}
    app = root / "cifar10"
    app.mkdir(parents=True)
    for suffix, factor in speed.items():
        placements = ["placement,local_bsz,step_time,sync_time"]
        scalability = ["local_bsz,step_time,sync_time,num_nodes,num_replicas"]
        for layout in ("1", "2", "4", "22", "44"):
            replicas = sum(int(d) for d in layout)
            for local in (32, 64, 128):
                sync = 0.0 if replicas == 1 else 0.004 * (2 if len(layout) > 1 else 1)
                step = (0.01 + 0.0004 * local) / factor + sync
                placements.append(f"{layout},{local},{step:.6f},{sync:.6f}")
        for nodes, replicas in ((2, 8), (4, 16)):
            for local in (32, 128):
                sync = 0.01 + 0.0005 * replicas
                step = (0.01 + 0.0004 * local) / factor + sync
                scalability.append(f"{local},{step:.6f},{sync:.6f},{nodes},{replicas}")
        (app / f"placements-{suffix}.csv").write_text("\n".join(placements) + "\n")
        (app / f"scalability-{suffix}.csv").write_text("\n".join(scalability) + "\n")
    for batch in (128, 512, 2048):
        rows = ["progress,iteration,metric,grad_sqr,grad_var"]
        for epoch in range(1, 11):
            rows.append(f"{epoch * 390.0},{epoch * 390},0.5,{1.0 / epoch},{2.0 + epoch}")
        (app / f"validation-{batch}.csv").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture(scope="module")
def profiles_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_profiles(tmp_path_factory.mktemp("sia-profiles"))


def sia(**options: Any) -> Sia:
    return Sia(SiaOptions(**{"node_gpus": NODE_GPUS, **options})).for_run(0)


def job(job_id: int, arrival: float = 0.0, done: float = 0.0) -> PolicyJob:
    return PolicyJob(job_id, "cifar10 (batch size 128)", 1, 1.0, arrival, 1000, done)


def problem(
    jobs: tuple[PolicyJob, ...],
    now: float,
    capacity: tuple[int, int] = (16, 16),
    profiles: Path | None = None,
) -> PolicyInput:
    """The policy's input; `profiles`: the run's measured profiles (--goodput-profiles)."""
    return PolicyInput(
        now=now,
        jobs=jobs,
        worker_types=TYPES,
        capacity=np.array(capacity, dtype=float),
        throughputs=np.ones((len(jobs), len(TYPES))),
        goodput_profiles=None if profiles is None else str(profiles),
    )


# -------------------------------------------------------------------------------- the reader


def test_the_profiles_give_each_gpu_type_its_own_model(profiles_dir: Path) -> None:
    profiles = read_profiles(str(profiles_dir))
    app = profiles.applications["cifar10"]
    assert sorted(app.by_suffix) == ["aws", "dgx-ext"]
    assert profiles.suffix_for("t4") == "aws" and profiles.suffix_for("a100") == "dgx-ext"
    assert profiles.suffix_for("k80") is None
    aws, dgx = app.by_suffix["aws"], app.by_suffix["dgx-ext"]
    # One-GPU speed: largest batch / slowest one-GPU step, 3x faster on the A100.
    assert aws.one_gpu_rate == pytest.approx(128 / (0.01 + 0.0004 * 128), rel=1e-4)
    assert dgx.one_gpu_rate / aws.one_gpu_rate == pytest.approx(3.0, rel=1e-3)
    assert (aws.limits.init_batch_size, aws.limits.max_batch_size) == (128, 2048)
    assert (aws.limits.min_local_bsz, aws.limits.max_local_bsz) == (32, 128)
    assert app.grad_at(0).sqr == pytest.approx(1.0) and app.grad_at(99).var == 12.0


@pytest.mark.parametrize(
    ("file", "text", "line", "field"),
    [
        ("placements-aws.csv", "placement,local_bsz,step_time\n1,32,0.1\n", 1, "sync_time"),
        ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n1,32,fast,0\n", 2,
         "step_time"),
        ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n1,32,0.1,0\n2x,32,0.1,0\n",
         3, "placement"),
        ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n1,3.5,0.1,0\n", 2,
         "local_bsz"),
        ("scalability-aws.csv", "local_bsz,step_time,sync_time,num_nodes,num_replicas\n"
         "32,0.1,0.01,3,2\n", 2, "num_replicas"),
        ("validation-128.csv", "progress,iteration,metric,grad_sqr,grad_var\n1,1,0.1,-1,2\n", 2,
         "grad_sqr"),
    ],
)  # fmt: skip
def test_a_malformed_profile_names_its_file_line_and_field(
    tmp_path: Path, file: str, text: str, line: int, field: str
) -> None:
    root = write_profiles(tmp_path / "traces")
    (root / "cifar10" / file).write_text(text)
    read_profiles.cache_clear()
    with pytest.raises(InputError) as caught:
        read_profiles(str(root))
    error = caught.value
    assert error.path is not None and error.path.endswith(file)
    assert (error.line, error.field) == (line, field)
    assert "\n" not in str(error)


def test_a_folder_without_profiles_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such folder") as missing:
        read_profiles(str(tmp_path / "nowhere"))
    assert missing.value.field == "--goodput-profiles"
    (tmp_path / "cifar10").mkdir()
    with pytest.raises(InputError, match="no application folder"):
        read_profiles(str(tmp_path))


def test_the_cli_reports_a_bad_profile_folder_in_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,1,128\n")
    result = run_shock(
        "run", "--quiet", "--preset", "sia", "--policy", "sia", "--trace", str(trace),
        "--goodput-profiles", str(tmp_path / "missing"), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert "no such folder" in output and "'--goodput-profiles'" in output


@pytest.mark.parametrize(
    ("option", "flag"),
    [("profiles=x", "--goodput-profiles"), ("calibrate=false", "--no-goodput-calibration")],
)
def test_the_profiles_are_no_policy_option(option: str, flag: str) -> None:
    # They define how fast the simulated jobs run, which is the run's to say.
    with pytest.raises(InputError, match=flag) as caught:
        build_request(RunOptions(policy="sia", preset="sia", policy_options=(option,)))
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------------------- configurations


@SETTINGS
@given(
    a100=st.integers(1, 40),
    t4=st.integers(1, 40),
    max_gpus=st.integers(1, 64),
)
def test_configurations_follow_each_types_node_size(a100: int, t4: int, max_gpus: int) -> None:
    configs = configurations(np.array([a100, t4], dtype=float), [8, 4], max_gpus)
    for config in configs:
        per_node, total = ((8, a100), (4, t4))[config.worker]
        assert config.gpus <= min(total, max_gpus)
        if config.num_nodes == 1 and config.gpus < per_node:
            assert config.gpus & (config.gpus - 1) == 0  # a power of two within one node
        else:
            assert config.gpus == config.num_nodes * per_node  # whole nodes
    assert len(set(configs)) == len(configs)


# ------------------------------------------------------------------------- the integer program


@settings(SETTINGS, max_examples=6)
@given(
    count=st.integers(1, 12),
    capacity=st.tuples(st.integers(1, 24), st.integers(1, 24)),
    max_gpus=st.sampled_from([4, 8, 16]),
    rounds=st.integers(1, 3),
)
def test_sia_keeps_capacity_one_configuration_and_its_limits(
    profiles_dir: Path, count: int, capacity: tuple[int, int], max_gpus: int, rounds: int
) -> None:
    policy = sia(max_gpus=max_gpus)
    jobs = tuple(job(i, arrival=float(10 * i), done=float(37 * i % 900)) for i in range(count))
    most: dict[int, int] = {}
    for r in range(rounds):
        at = problem(jobs, 100.0 + 60 * r, capacity, profiles_dir)
        allocation = policy.allocate(at, SolverSpec())
        assert allocation.elastic is not None
        valid = configurations(np.array(capacity, dtype=float), [8, 4], max_gpus)
        shapes = {(TYPES[c.worker], c.num_nodes, c.gpus) for c in valid}
        used = dict.fromkeys(TYPES, 0)
        for key, grant in allocation.elastic.items():
            job_id = int(key)  # type: ignore[arg-type]
            # One configuration per job (a grant), one of Sia's, within the job's limits.
            assert (grant.worker_type, grant.num_nodes, grant.gpus) in shapes
            assert grant.gpus <= max_gpus
            # Bootstrapping: at most twice the GPUs it has run on (one before it ran).
            assert grant.gpus <= max(2 * most.get(job_id, 0), 1)
            used[grant.worker_type] += grant.gpus
            assert grant.atomic_batch_size is not None and 32 <= grant.atomic_batch_size <= 128
        for key, grant in allocation.elastic.items():
            job_id = int(key)  # type: ignore[arg-type]
            most[job_id] = max(most.get(job_id, 0), grant.gpus)
        for w, total in zip(TYPES, capacity, strict=True):
            assert used[w] <= total


def test_a_new_job_starts_on_one_gpu_then_grows_onto_the_faster_type(profiles_dir: Path) -> None:
    policy = sia()
    first = policy.allocate(problem((job(0),), 0.0, profiles=profiles_dir), SolverSpec())
    assert first.elastic is not None and first.elastic[0].gpus == 1
    grants = [first.elastic[0]]
    for r in range(1, 8):
        allocation = policy.allocate(
            problem((job(0),), 600.0 * r, profiles=profiles_dir), SolverSpec()
        )
        assert allocation.elastic is not None
        grants.append(allocation.elastic[0])
    sizes = [g.gpus for g in grants]
    assert all(b <= 2 * a for a, b in itertools.pairwise(sizes))
    # Alone on the cluster, it ends on the A100s (3x faster, projected before it ran there).
    assert grants[-1].worker_type == "a100" and grants[-1].gpus > 1


def test_without_bootstrapping_a_job_takes_the_faster_type_at_once(profiles_dir: Path) -> None:
    one_job = problem((job(0),), 0.0, profiles=profiles_dir)
    allocation = sia(explore=False).allocate(one_job, SolverSpec())
    assert allocation.elastic is not None
    assert allocation.elastic[0].worker_type == "a100" and allocation.elastic[0].gpus > 1


def test_a_restoring_job_keeps_its_configuration(profiles_dir: Path) -> None:
    imagenet = PolicyJob(0, "imagenet (batch size 200)", 1, 1.0, 0.0, 1000, 0.0)
    policy = sia(explore=False)
    slow_fast = np.array([[1.0, 3.0]])
    first = PolicyInput(0.0, (imagenet,), TYPES, np.array([16.0, 16.0]), slow_fast)
    before = policy.allocate(first, SolverSpec()).elastic
    assert before is not None and before[0].worker_type == "t4"
    # The speeds swap 60 s later; ImageNet restores for 250 s, so it stays where it is.
    swapped = PolicyInput(60.0, (imagenet,), TYPES, np.array([16.0, 16.0]), slow_fast[:, ::-1])
    after = policy.allocate(swapped, SolverSpec()).elastic
    assert after is not None and after[0] == before[0]
    # Without pinning it moves at once (it is younger than its restart penalty).
    free = sia(explore=False, pin_restarting=False)
    free.allocate(first, SolverSpec())
    moved = free.allocate(swapped, SolverSpec()).elastic
    assert moved is not None and moved[0].worker_type == "a100"


@SETTINGS
@given(
    age=st.floats(0.0, 1e5),
    restarts=st.integers(0, 50),
    penalty=st.sampled_from([25.0, 30.0, 120.0, 250.0]),
)
def test_the_restart_factor_only_ever_discounts(age: float, restarts: int, penalty: float) -> None:
    factor = restart_factor(age, restarts, penalty)
    assert 0.0 <= factor <= 1.0
    if age < penalty:
        assert factor == 1.0  # a job younger than its penalty moves freely
    assert restart_factor(age, restarts + 1, penalty) <= factor


@SETTINGS
@given(restarts=st.integers(0, 30), age=st.floats(300.0, 1e5))
def test_a_restart_penalty_lowers_the_value_of_moving(
    profiles_dir: Path, restarts: int, age: float
) -> None:
    policy = sia(explore=False)
    jobs = (job(0),)
    first = problem(jobs, 0.0, profiles=profiles_dir)
    policy.allocate(first, SolverSpec())
    current = policy.ledger.current[0]
    policy.ledger.restarts[0] = restarts
    later = problem(jobs, age, profiles=profiles_dir)
    configs = policy.configurations(later)
    goodput = policy.goodputs(later, configs)
    fresh = sia(explore=False)
    undiscounted = fresh.utilities(later, configs, goodput)
    discounted = policy.utilities(later, configs, goodput)
    for c, config in enumerate(configs):
        if goodput[0, c] <= 0:
            continue
        if config == current:
            assert discounted[0, c] == undiscounted[0, c]
        else:
            # p < 0: a smaller goodput costs more in the minimised objective.
            assert discounted[0, c] >= undiscounted[0, c]


# ------------------------------------------------------------------------------------ preset


def test_the_sia_preset_brings_its_cluster_round_and_node_sizes(tmp_path: Path) -> None:
    # A workload in Sia's (Pollux's) CSV form.
    trace = tmp_path / "workload.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,1,128\n")
    request = build_request(RunOptions(policy="sia", preset="sia", trace=str(trace)))
    assert request.cluster.gpus_per_type == {"t4": 24, "a100": 16, "rtx2080ti": 24}
    assert request.cluster.gpus_per_server == {"t4": 4, "a100": 8, "rtx2080ti": 8}
    assert request.config.mechanism.round_length_s == 60.0
    # Each application's restore time at every (re)start, the first included.
    costs = request.config.overhead_by_job_type
    assert costs is not None and (costs["cifar10"], costs["imagenet"]) == (50.0, 250.0)
    assert request.config.overhead_on_first_start
    assert isinstance(request.policy, Sia)
    assert request.policy.node_gpus == {"t4": 4, "a100": 8, "rtx2080ti": 8}
    # --cluster overrides the preset's.
    other = build_request(RunOptions(policy="sia", preset="sia", cluster="t4=8", trace=str(trace)))
    assert other.cluster.gpus_per_type == {"t4": 8}


def test_the_profiles_set_each_types_speed_in_simulation(profiles_dir: Path) -> None:
    from shock.goodput.progress import Configuration, step_seconds

    profiles = read_profiles(str(profiles_dir))
    t4, a100 = (profiles.curve("cifar10", w) for w in ("t4", "a100"))
    assert t4 is not None and a100 is not None
    assert profiles.curve("cifar10", "k80") is None  # not measured: bundled model
    assert profiles.curve("bert", "t4") is None
    config = Configuration(nodes=1, replicas=2, atomic_bsz=64)
    # The A100 measured 3x faster; both slowed by Sia's calibration for CIFAR-10 (1.8).
    ratio = step_seconds(t4.perf, config) / step_seconds(a100.perf, config)
    assert 2.0 < ratio < 3.5
    plain = profiles.curve("cifar10", "t4", calibrate=False)
    assert plain is not None
    assert step_seconds(t4.perf, config) == pytest.approx(1.8 * step_seconds(plain.perf, config))
    assert t4.limits.max_local_bsz == 128


def test_simulated_jobs_step_at_the_measured_times_as_sias_simulator_reads_them(
    profiles_dir: Path,
) -> None:
    from shock.goodput.progress import Configuration

    profiles = read_profiles(str(profiles_dir))
    one = Configuration(nodes=1, replicas=2, atomic_bsz=96)
    # A measured placement: its rows interpolated linearly in the per-GPU batch (written as
    # (0.01 + 0.0004 b) + 0.004 on T4), then slowed by CIFAR-10's calibration (1.8).
    expected = 0.01 + 0.0004 * 96 + 0.004
    plain = profiles.step_seconds("cifar10", "t4", (2,), one, calibrate=False)
    assert plain == pytest.approx(expected, rel=1e-5)
    assert profiles.step_seconds("cifar10", "t4", (2,), one) == pytest.approx(1.8 * plain)
    # Accumulation steps add the compute part (step - sync) once each.
    accumulating = Configuration(nodes=1, replicas=2, atomic_bsz=96, accum_steps=2)
    assert profiles.step_seconds(
        "cifar10", "t4", (2,), accumulating, calibrate=False
    ) == pytest.approx(expected + 2 * (expected - 0.004), rel=1e-5)
    # The A100's rows, not the T4's; a placement never measured is interpolated over
    # (nodes, GPUs, batch) between the measurements; beyond them, or an unmeasured type: None.
    a100 = profiles.step_seconds("cifar10", "a100", (2,), one, calibrate=False)
    assert a100 == pytest.approx((0.01 + 0.0004 * 96) / 3 + 0.004, rel=1e-5)
    three = profiles.step_seconds("cifar10", "t4", (3,), one, calibrate=False)
    assert three == pytest.approx(expected, rel=1e-4)  # one node of 2 or 4: the same times
    assert profiles.step_seconds("cifar10", "t4", (2,), replace(one, atomic_bsz=512)) is None
    assert profiles.step_seconds("cifar10", "k80", (2,), one) is None
    assert profiles.step_seconds("bert", "t4", (2,), one) is None


def test_the_policy_state_survives_a_snapshot(profiles_dir: Path) -> None:
    policy = sia()
    jobs = (job(0), job(1, arrival=30.0))
    for r in range(3):
        policy.allocate(problem(jobs, 600.0 * r, profiles=profiles_dir), SolverSpec())
    restored = sia()
    restored.restore(policy.snapshot())
    assert restored.ledger == policy.ledger
    later = problem(jobs, 2400.0, profiles=profiles_dir)
    assert (
        restored.allocate(later, SolverSpec()).elastic
        == policy.allocate(later, SolverSpec()).elastic
    )


def test_the_runs_profiles_set_how_fast_simulated_jobs_run_whatever_the_policy(
    profiles_dir: Path, tmp_path: Path
) -> None:
    # pollux never reads the profiles: what changes is the simulated world, the run's input.
    trace = tmp_path / "workload.csv"
    trace.write_text(
        "name,time,application,num_replicas,batch_size\n"
        "cifar10-0,0,cifar10,4,512\ncifar10-1,200,cifar10,2,256\n"
    )
    registry = default_registry()

    def avg_jct(**options: Any) -> float:
        request = build_request(
            RunOptions(
                policy="pollux",
                preset="pollux",
                trace=str(trace),
                policy_options=("generations=5", "population=10"),
                **options,
            ),
            registry,
        )
        assert request.config.mechanism.goodput_profiles == options.get("goodput_profiles")
        result = registry.get("backend", "simulator").run(request)
        return float(result.metrics.avg_jct_s)

    bundled = avg_jct()
    calibrated = avg_jct(goodput_profiles=str(profiles_dir))
    measured = avg_jct(goodput_profiles=str(profiles_dir), goodput_calibration=False)
    assert len({bundled, calibrated, measured}) == 3
    # Sia's calibration stretches CIFAR-10's steps 1.8x: the jobs take longer.
    assert calibrated > measured
