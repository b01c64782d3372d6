"""`--adaptation-rules artifact-simulator`: batch sizes evolve as in Shockwave's round-by-round
simulator (no warm-up, fewer regimes, GNS doubling one step at a time, epochs rounded up)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from test_dynamics import dynamic_jobs
from test_simulator import simulate

from shock.core.errors import InputError
from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.throughputs import load_throughputs
from shock.core.trace import Trace
from shock.engine.epochs import steps_per_epoch
from shock.engine.mechanism import Mechanism
from shock.engine.runner import RunOptions, build_request, bundled_trace_path
from shock.engine.units import JobState
from shock.plugins.adaptation.artifact_simulator import (
    GNS_PATTERN_EPOCHS,
    ArtifactBatchDynamics,
    accordion_target,
    gns_target,
    rescale_rounded_up,
    started_epochs,
)

WISR = str(bundled_trace_path().parent.parent / "shockwave_wisr_throughputs.json")
ROUND = 120.0
ARTIFACT = "artifact-simulator"


def test_started_epochs_counts_a_partial_epoch() -> None:
    assert started_epochs(0, 100) == 0
    assert started_epochs(100, 100) == 1
    assert started_epochs(100.5, 100) == 2


def test_accordion_regimes_have_no_warm_up_and_no_profile_extras() -> None:
    # ResNet-50 from 16: critical while e mod 30 < 10, with no end at epoch 600.
    assert accordion_target("ResNet-50", 16, 16, 9) == 16
    assert accordion_target("ResNet-50", 16, 16, 10) == 128  # epoch 10 of 100: no 30% rule
    assert accordion_target("ResNet-50", 16, 128, 29) == 128
    assert accordion_target("ResNet-50", 16, 128, 30) == 16
    assert accordion_target("ResNet-50", 16, 128, 630) == 16  # the profile caps at 600
    # Recommendation from 2048: head of 40 epochs, no [60,70) or [80,90).
    assert accordion_target("Recommendation", 2048, 2048, 39) == 2048
    assert accordion_target("Recommendation", 2048, 2048, 40) == 8192
    assert accordion_target("Recommendation", 2048, 8192, 65) == 8192
    assert accordion_target("Recommendation", 2048, 8192, 85) == 8192
    # ResNet-18 from 256 is already at the largest size; from 64 its regimes apply.
    assert accordion_target("ResNet-18", 256, 256, 50) == 256
    assert accordion_target("ResNet-18", 64, 64, 10) == 256
    assert accordion_target("ResNet-18", 64, 256, 155) == 64
    assert accordion_target("Transformer", 32, 32, 50) == 32  # never adapted


def test_gns_doubles_one_step_at_a_time_and_looks_one_epoch_ahead() -> None:
    # LM from 10 on one GPU: the measured schedule is x2 from epoch 11, x4 from 21, x8 from 41.
    job = JobSpec(0, "LM (batch size 10)", 10**6, mode="gns")
    pattern = default_registry().get("adaptation", "gns").batch_sizes(job, 760)

    def target(batch_size: int, epoch: int) -> int:
        return gns_target(lambda: (pattern[epoch], pattern[epoch + 1]), "LM", batch_size)

    assert target(10, 9) == 10
    assert target(10, 10) == 20  # epoch 11 is bigger: ask now
    assert target(20, 10) == 20
    assert target(20, 20) == 40
    assert target(10, 45) == 20  # far behind: still a single doubling
    assert target(40, 40) == 80
    assert target(80, 100) == 80  # the model's limit


class _PatternsOnly:
    """A GNS plugin with only the contract's batch_sizes (no batch_size_at)."""

    def __init__(self) -> None:
        self._gns = default_registry().get("adaptation", "gns")

    def batch_sizes(self, job: JobSpec, num_epochs: int) -> list[int]:
        sizes: list[int] = self._gns.batch_sizes(job, num_epochs)
        return sizes


class _OnePlugin:
    def __init__(self, plugin: object) -> None:
        self.plugin = plugin

    def get(self, kind: str, name: str) -> object:
        return self.plugin


def test_the_gns_pattern_is_drawn_again_only_when_it_falls_short() -> None:
    # LM from 5 on 4 GPUs: its last epoch falls back to 5 (a segment that spares it), so the
    # pattern's length shows in its last entry. The pattern stays 760 long, then grows to
    # epoch + 2 when the next epoch is past its end, and is kept (not shortened) after.
    job = JobSpec(0, "LM (batch size 5)", 10**9, scale_factor=4, mode="gns")
    gns = default_registry().get("adaptation", "gns")
    epochs_and_lengths = [(0, 760), (100, 760), (758, 760), (759, 761), (900, 902), (899, 902)]
    answers = {}
    for name, plugin in (("built-in", gns), ("batch_sizes only", _PatternsOnly())):
        dynamics = ArtifactBatchDynamics([job], _OnePlugin(plugin), lambda t, s: True)
        answers[name] = [dynamics._gns_sizes(job, epoch) for epoch, _ in epochs_and_lengths]
    expected = []
    for epoch, length in epochs_and_lengths:
        pattern = gns.batch_sizes(job, length)
        expected.append((pattern[epoch], pattern[epoch + 1]))
    assert answers["built-in"] == answers["batch_sizes only"] == expected
    assert GNS_PATTERN_EPOCHS == 760
    assert expected[3] == (80, 5)  # the last epoch's own rule, at length 761


def test_rescaling_rounds_completed_epochs_up_and_keeps_total_epochs() -> None:
    per_10, per_20 = steps_per_epoch("LM", 10), steps_per_epoch("LM", 20)  # 5968, 2984
    total = per_10 * 22 + 100  # 23 epochs, the last partial
    new = rescale_rounded_up("LM", total, per_10 * 11.25, 10, 20)
    assert new.steps_done == 12 * per_20  # 11.25 epochs done counts as 12
    assert new.total_steps == math.ceil(total / 2)  # halving keeps 23 epochs
    # Recommendation 4096 -> 8192 (29 and 15 steps per epoch): 3500 steps are 121 epochs;
    # halving gives 1750 = 117 epochs, so the total becomes 121 x 15.
    assert steps_per_epoch("Recommendation", 4096) == 29
    kept = rescale_rounded_up("Recommendation", 3500, 0, 4096, 8192)
    assert kept.total_steps == 121 * 15
    assert kept.steps_done == 0


def run_alone(job: JobSpec, monkeypatch: pytest.MonkeyPatch, rules: str = ARTIFACT) -> list:
    """Simulate one job on one V100 (no restart cost); return its batch-size changes as
    (old size, new size, steps done before, total before, steps done after, total after)."""
    changes: list[tuple[int, int, float, int, float, int]] = []
    change = Mechanism.change_job_type

    def spy(self: Mechanism, state: JobState, job_type: str, total: int, done: float) -> None:
        old = (state.spec.batch_size or 0, state.steps_done, state.total_steps)
        change(self, state, job_type, total, done)
        changes.append((old[0], state.spec.batch_size or 0, old[1], old[2], done, total))

    monkeypatch.setattr(Mechanism, "change_job_type", spy)
    result = simulate(
        [job],
        cluster="1:0:0",
        preset="shockwave",
        throughputs=WISR,
        preemption_overhead_s=0.0,
        adaptation_rules=rules,
    )
    assert result.unfinished_jobs == 0
    return changes


def first_boundary_past(steps_per_round: int, threshold: float) -> int:
    """The first round boundary k (k rounds run back to back) with k x steps > threshold."""
    return math.floor(threshold / steps_per_round) + 1


def test_an_accordion_job_follows_the_simulator_rules_round_by_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = load_throughputs(WISR)
    per_16, per_128 = steps_per_epoch("ResNet-50", 16), steps_per_epoch("ResNet-50", 128)
    total = per_16 * 45
    job = JobSpec(0, "ResNet-50 (batch size 16)", total, mode="accordion")
    changes = run_alone(job, monkeypatch)
    assert [(a, b) for a, b, *_ in changes] == [(16, 128), (128, 16), (16, 128)]

    # Up: decided at the first boundary where ceil(progress) reaches epoch 10 (progress past
    # 9 epochs), carried out one round later; the begun epoch counts as done.
    n16 = int(table.throughput(job.job_type, 1, "v100") * ROUND)
    decided = first_boundary_past(n16, 9 * per_16)
    _, _, before, total_before, after, total_after = changes[0]
    assert before == (decided + 1) * n16
    assert total_before == total
    assert after == math.ceil(before / per_16) * per_128
    assert total_after == math.ceil(total * 16 / 128)  # 45 epochs either way
    assert math.ceil(total_after / per_128) == 45

    # Down: decided once ceil(progress) reaches epoch 30, again carried out a round later.
    n128 = int(table.throughput("ResNet-50 (batch size 128)", 1, "v100") * ROUND)
    decided_steps = after + first_boundary_past(n128, 29 * per_128 - after) * n128
    _, _, before, _, after, total_after = changes[1]
    assert before == decided_steps + n128
    assert after == math.ceil(before / per_128) * per_16
    assert math.ceil(total_after / per_16) == 45


def test_a_gns_job_doubles_step_by_step(monkeypatch: pytest.MonkeyPatch) -> None:
    table = load_throughputs(WISR)
    per_10, per_20 = steps_per_epoch("LM", 10), steps_per_epoch("LM", 20)
    job = JobSpec(0, "LM (batch size 10)", per_10 * 30, mode="gns")
    changes = run_alone(job, monkeypatch)
    assert [(a, b) for a, b, *_ in changes] == [(10, 20), (20, 40)]
    # 10 -> 20: asked once epoch 11 is next (ceil(progress) reaches 10), done a round later.
    n10 = int(table.throughput(job.job_type, 1, "v100") * ROUND)
    _, _, before, _, after, total_after = changes[0]
    assert before == (first_boundary_past(n10, 9 * per_10) + 1) * n10
    assert after == math.ceil(before / per_10) * per_20
    assert total_after == per_20 * 30
    # 20 -> 40: asked once epoch 21 is next.
    n20 = int(table.throughput("LM (batch size 20)", 1, "v100") * ROUND)
    _, _, before, _, _, _ = changes[1]
    assert before == after + (first_boundary_past(n20, 19 * per_20 - after) + 1) * n20


def test_the_profile_rules_stay_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same Accordion job by the profile rules: 16 for the first 30% (13 of 45 epochs).
    job = JobSpec(0, "ResNet-50 (batch size 16)", steps_per_epoch("ResNet-50", 16) * 45,
                  mode="accordion")
    changes = run_alone(job, monkeypatch, rules="profile")
    first_epoch_up = changes[0][2] / steps_per_epoch("ResNet-50", 16)
    assert first_epoch_up > 13.5
    assert build_request(RunOptions(), trace=Trace((job,))).config.adaptation_rules == "profile"


def test_the_shockwave_preset_brings_the_artifact_rules() -> None:
    job = JobSpec(0, "ResNet-50 (batch size 16)", 100, mode="accordion")
    request = build_request(RunOptions(preset="shockwave"), trace=Trace((job,)))
    assert request.config.adaptation_rules == ARTIFACT
    # --adaptation-rules overrides the preset's.
    chosen = build_request(
        RunOptions(preset="shockwave", adaptation_rules="profile"), trace=Trace((job,))
    )
    assert chosen.config.adaptation_rules == "profile"


@pytest.mark.parametrize("policy", ["max_min_fairness", "shockwave", "finish_time_fairness"])
def test_a_dynamic_trace_runs_under_both_rule_sets(policy: str) -> None:
    jobs = dynamic_jobs(14)
    results = {}
    for rules in ("profile", ARTIFACT):
        result = simulate(
            jobs, policy=policy, cluster="8:0:0", preset="shockwave", adaptation_rules=rules
        )
        assert result.unfinished_jobs == 0
        assert all(math.isfinite(r) for r in result.rhos)
        assert result.to_document()["adaptation_rules"] == rules
        results[rules] = result
    # The rule sets give different batch-size histories, hence different completions.
    assert [r.completion_s for r in results["profile"].records] != [
        r.completion_s for r in results[ARTIFACT].records
    ]


def test_unknown_rules_are_a_clear_error() -> None:
    jobs = [replace(j, total_steps=100) for j in dynamic_jobs(1)]
    with pytest.raises(InputError, match="artifact-simulator"):
        simulate(jobs, cluster="1:0:0", adaptation_rules="nope")


def test_the_rules_are_refused_where_real_jobs_adapt() -> None:
    from shock.engine.runner import build_request

    with pytest.raises(InputError, match="simulator only"):
        build_request(RunOptions(backend="grpc", adaptation_rules=ARTIFACT))


def test_the_cli_flag_selects_the_rules_and_rejects_others() -> None:
    from typer.testing import CliRunner

    from shock.cli.app import app

    bad = CliRunner().invoke(app, ["run", "--adaptation-rules", "nope", "--quiet"])
    assert bad.exit_code != 0
    # The entry point prints the InputError as one line (checked by hand: no traceback).
    assert "artifact-simulator, profile" in bad.output + str(bad.exception)
    path = bundled_trace_path("shockwave_220_multigpu_dynamic.trace")
    good = CliRunner().invoke(
        app,
        ["run", "--trace", str(path), "--throughputs", WISR, "--cluster", "64:0:0",
         "--policy", "max_min_fairness", "--preset", "shockwave",
         "--adaptation-rules", ARTIFACT, "--quiet"],
    )
    assert good.exit_code == 0, good.output
