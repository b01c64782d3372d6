"""The training harness in process: resume is bit-identical, leases, preemption, batch-size
changes and adaptation requests, checkpoints."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the harness needs PyTorch (pip install .[cluster])")
torch.set_num_threads(1)  # as in a job process

from shock.job.channel import MemoryChannel  # noqa: E402
from shock.job.messages import (  # noqa: E402
    BatchSizeApproval,
    BatchSizeRequest,
    CheckpointWritten,
    Exit,
    LeaseGrant,
    LeaseRequest,
    Preempt,
    Progress,
    Started,
)
from shock.workloads.checkpoint import load_latest_checkpoint  # noqa: E402
from shock.workloads.families import FAMILIES  # noqa: E402
from shock.workloads.harness import (  # noqa: E402
    CheckpointMismatchError,
    JobConfig,
    TrainingHarness,
)

SMALL_BATCH = {
    "ResNet-18": 4,
    "ResNet-50": 4,
    "Transformer": 8,
    "LM": 5,
    "Recommendation": 64,
    "CycleGAN": 1,
    "A3C": 4,
}


def _job(tmp_path: Path, job_type: str = "LM (batch size 5)", **overrides) -> JobConfig:
    settings = {
        "job_id": 1,
        "job_type": job_type,
        "target_steps": 12,
        "checkpoint_dir": tmp_path / "ckpt",
        "report_every_s": 1e-9,  # a progress message after every step
    }
    settings.update(overrides)
    return JobConfig(**settings)


def _run(config: JobConfig, react=None, clock=None) -> tuple[TrainingHarness, MemoryChannel]:
    channel = MemoryChannel(react)
    harness = TrainingHarness(config, channel, **({"clock": clock} if clock else {}))
    harness.run()
    return harness, channel


def _exit(channel: MemoryChannel) -> Exit:
    last = channel.sent[-1]
    assert isinstance(last, Exit)
    return last


def _assert_same_training_state(a: TrainingHarness, b: TrainingHarness) -> None:
    for (name, x), (_, y) in zip(
        a.workload.model.state_dict().items(), b.workload.model.state_dict().items(), strict=True
    ):
        assert torch.equal(x, y), f"parameter {name} differs"
    opt_a, opt_b = a.workload.optimizer.state_dict(), b.workload.optimizer.state_dict()
    for key in opt_a["state"]:
        for field, value in opt_a["state"][key].items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(opt_b["state"][key][field]))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path, family):
    job_type = f"{family} (batch size {SMALL_BATCH[family]})"
    whole, channel = _run(_job(tmp_path / "whole", job_type, target_steps=6))
    assert _exit(channel) == Exit("done", 6, 6)
    rng_after_whole = torch.get_rng_state()
    _, channel = _run(_job(tmp_path / "split", job_type, target_steps=6, lease_steps=4))
    assert _exit(channel) == Exit("lease_expired", 4, 6)
    # The relaunch rebuilds from the seed; only the checkpoint can restore the RNG stream
    # that dropout (Transformer) and action sampling (A3C) consume.
    second, channel = _run(_job(tmp_path / "split", job_type, target_steps=6))
    assert channel.sent[0] == Started(1, 4, SMALL_BATCH[family], 4)
    assert _exit(channel) == Exit("done", 6, 6)
    assert torch.equal(rng_after_whole, torch.get_rng_state())
    _assert_same_training_state(whole, second)


@pytest.mark.parametrize("mode", ["accordion", "gns"])
def test_resume_restores_adaptation_state(tmp_path, mode):
    config = {"target_steps": 10, "adaptation": mode, "adaptation_window_samples": 15}
    whole, _ = _run(_job(tmp_path / "whole", **config))
    _run(_job(tmp_path / "split", lease_steps=7, **config))
    second, _ = _run(_job(tmp_path / "split", **config))
    _assert_same_training_state(whole, second)
    assert whole.policy.state_dict() == second.policy.state_dict()


def test_lease_request_renewal_and_expiry(tmp_path):
    renewals = [LeaseGrant(steps=5)]

    def renew_once(message):
        if isinstance(message, LeaseRequest) and renewals:
            return [renewals.pop()]
        return []

    _, channel = _run(_job(tmp_path, target_steps=100, lease_steps=10), renew_once)
    requests = [m for m in channel.sent if isinstance(m, LeaseRequest)]
    # 10% of 10 steps = 1 step left -> request at step 9; the 5-step renewal: request at 14.
    assert [r.step for r in requests] == [9, 14]
    assert _exit(channel) == Exit("lease_expired", 15, 100)
    checkpoint = channel.sent[-2]
    assert isinstance(checkpoint, CheckpointWritten) and checkpoint.step == 15
    assert Path(checkpoint.path).exists()


def test_lease_in_seconds_expires_at_an_iteration_boundary(tmp_path):
    ticks = itertools.count()

    def clock() -> float:
        return next(ticks) * 0.05

    _, channel = _run(_job(tmp_path, target_steps=10_000, lease_s=2.0), clock=clock)
    exit_message = _exit(channel)
    assert exit_message.reason == "lease_expired"
    assert 0 < exit_message.step < 10_000
    assert any(isinstance(m, LeaseRequest) for m in channel.sent)
    found = load_latest_checkpoint(tmp_path / "ckpt")
    assert found is not None and found[1]["step"] == exit_message.step


def test_initial_lease_in_seconds_counts_from_launch(tmp_path):
    def steps_within_lease(launched_at: float | None, directory: Path) -> int:
        ticks = itertools.count(100)  # the clock advances one second per reading
        channel = MemoryChannel()
        config = _job(directory, target_steps=10_000, lease_s=10.0)
        harness = TrainingHarness(
            config, channel, clock=lambda: float(next(ticks)), launched_at=launched_at
        )
        harness.run()
        assert _exit(channel).reason == "lease_expired"
        return _exit(channel).step

    # Two clock readings per step. Counted from the first reading (100), the lease ends at
    # 110: 5 steps; launched 6 s earlier (94), it ends at 104: 2 steps.
    assert steps_within_lease(None, tmp_path / "a") == 5
    assert steps_within_lease(94.0, tmp_path / "b") == 2


def test_preempt_message_checkpoints_and_exits(tmp_path):
    def preempt_at_step_4(message):
        return [Preempt()] if isinstance(message, Progress) and message.step == 4 else []

    _, channel = _run(_job(tmp_path, target_steps=50), preempt_at_step_4)
    assert _exit(channel) == Exit("preempted", 4, 50)
    found = load_latest_checkpoint(tmp_path / "ckpt")
    assert found is not None and found[1]["step"] == 4 and found[1]["samples"] == 20


def test_preempt_call_like_sigterm(tmp_path):
    channel = MemoryChannel()
    harness = TrainingHarness(_job(tmp_path, target_steps=50), channel)
    channel._react = lambda m: (harness.preempt(), [])[1] if isinstance(m, Progress) else []
    harness.run()
    # The first step is not reported (start-up costs); preempted after the first report.
    assert _exit(channel) == Exit("preempted", 2, 50)


def test_lost_agent_means_checkpoint_and_stop(tmp_path):
    channel = MemoryChannel()

    def agent_dies_at_step_3(message):
        if isinstance(message, Progress) and message.step == 3:
            channel.agent_connected = False
        return []

    channel._react = agent_dies_at_step_3
    TrainingHarness(_job(tmp_path, target_steps=50), channel).run()
    assert _exit(channel) == Exit("preempted", 3, 50)
    found = load_latest_checkpoint(tmp_path / "ckpt")
    assert found is not None and found[1]["step"] == 3


def test_batch_size_change_rescales_the_remaining_steps(tmp_path):
    def approve_at_step_4(message):
        if isinstance(message, Progress) and message.step == 4:
            return [BatchSizeApproval(30)]
        return []

    harness, channel = _run(_job(tmp_path, target_steps=40), approve_at_step_4)
    # 40 x 5 = 200 samples; 20 done at step 4; 180 left at 30 per step = 6 more steps.
    assert _exit(channel) == Exit("done", 10, 10)
    progress = [m for m in channel.sent if isinstance(m, Progress)]
    assert [m.step for m in progress] == list(range(2, 11))
    assert all(m.batch_size == (5 if m.step <= 4 else 30) for m in progress)
    assert progress[-1].samples == 200
    assert harness.progress.samples == harness.progress.total_samples == 200


def test_last_batch_is_partial_so_samples_are_preserved_exactly(tmp_path):
    def approve_at_start(message):
        return [BatchSizeApproval(7)] if isinstance(message, Started) else []

    harness, channel = _run(_job(tmp_path, target_steps=10), approve_at_start)
    # 50 samples at 7 per step: 7 full steps and one of 1 sample.
    assert _exit(channel) == Exit("done", 8, 8)
    assert harness.progress.samples == 50


def test_accordion_asks_and_switches_only_on_approval(tmp_path):
    config = {"target_steps": 60, "adaptation": "accordion", "adaptation_window_samples": 25}
    _, channel = _run(_job(tmp_path / "ask", **config))
    requests = [m for m in channel.sent if isinstance(m, BatchSizeRequest)]
    assert requests, "Accordion never asked for a larger batch"
    assert {(r.batch_size, r.reason) for r in requests} == {(80, "accordion")}
    assert len(requests) == 1  # asked once, not at every step
    assert all(m.batch_size == 5 for m in channel.sent if isinstance(m, Progress))
    assert _exit(channel) == Exit("done", 60, 60)

    def approve(message):
        if isinstance(message, BatchSizeRequest):
            return [BatchSizeApproval(message.batch_size)]
        return []

    harness, channel = _run(_job(tmp_path / "approve", **config), approve)
    assert any(m.batch_size == 80 for m in channel.sent if isinstance(m, Progress))
    assert harness.progress.samples == 300
    assert _exit(channel).step == harness.progress.target_steps


def test_gns_measures_a_positive_noise_scale_and_requests_doubling(tmp_path):
    config = {"target_steps": 80, "adaptation": "gns", "adaptation_window_samples": 50}
    harness, channel = _run(_job(tmp_path, "LM (batch size 10)", **config))
    noise = harness.policy.noise_scale  # type: ignore[attr-defined]
    # This seeded LM measures B_noise of about 31: doubling 10 -> 20 is allowed, and the job
    # asks once (it has no approval, so it stays at 10).
    assert noise is not None and 20 <= noise < 40
    requests = [(m.batch_size, m.reason) for m in channel.sent if isinstance(m, BatchSizeRequest)]
    assert requests == [(20, "gns")]
    assert all(m.batch_size == 10 for m in channel.sent if isinstance(m, Progress))


def test_relaunch_after_done_exits_done_at_once(tmp_path):
    _run(_job(tmp_path, target_steps=5))
    _, channel = _run(_job(tmp_path, target_steps=5))
    assert channel.sent[0] == Started(1, 5, 5, 5)
    assert _exit(channel) == Exit("done", 5, 5)
    assert not any(isinstance(m, CheckpointWritten) for m in channel.sent)


def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, capsys):
    _run(_job(tmp_path, target_steps=20, lease_steps=3))
    _run(_job(tmp_path, target_steps=20, lease_steps=3))
    newest = tmp_path / "ckpt" / "ckpt-6.pt"
    newest.write_bytes(newest.read_bytes()[:100])  # a torn write
    _, channel = _run(_job(tmp_path, target_steps=20, lease_steps=1))
    assert channel.sent[0] == Started(1, 3, 5, 3)
    assert "unreadable checkpoint skipped" in capsys.readouterr().err


def test_checkpoints_are_atomic_and_only_the_newest_two_are_kept(tmp_path):
    for _ in range(4):
        _run(_job(tmp_path, target_steps=20, lease_steps=2))
    names = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert names == ["ckpt-6.pt", "ckpt-8.pt"]  # no temporary files left behind
    state = torch.load(tmp_path / "ckpt" / "ckpt-8.pt", weights_only=True)
    for key in ("model", "optimizer", "step", "samples", "batch_size", "rng", "adaptation"):
        assert key in state


def test_another_jobs_checkpoint_is_refused(tmp_path):
    _run(_job(tmp_path, target_steps=5))
    with pytest.raises(CheckpointMismatchError, match="'job_type'"):
        TrainingHarness(_job(tmp_path, "LM (batch size 10)", target_steps=5), MemoryChannel())


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"target_steps": 0}, "target steps"),
        ({"adaptation": "bogus"}, "unknown adaptation"),
        ({"report_every_s": 0}, "report_every_s"),
        ({"lease_steps": -1}, "lease steps"),
    ],
)
def test_bad_configs_are_refused(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        _job(tmp_path, **overrides)
