"""Every workload trains: its loss falls over a short run (A3C: its greedy policy improves)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="the workloads need PyTorch (pip install .[cluster])")
torch.set_num_threads(1)  # as in a job process

from shock.workloads.families import FAMILIES  # noqa: E402
from shock.workloads.workload import build_workload  # noqa: E402

# (steps, batch size): enough for a clear trend, a second or less each on one core.
RUNS = {
    "ResNet-18": (40, 16),
    "ResNet-50": (50, 16),
    "Transformer": (60, 32),
    "LM": (40, 16),
    "Recommendation": (40, 512),
    "CycleGAN": (40, 1),
}


def test_every_family_has_a_run_here():
    assert set(RUNS) | {"A3C"} == set(FAMILIES)


@pytest.mark.parametrize("family", sorted(RUNS))
def test_loss_falls(family):
    steps, batch_size = RUNS[family]
    workload = build_workload(family, seed=0)
    losses = [workload.train_step(i * batch_size, batch_size) for i in range(steps)]
    assert all(math.isfinite(loss) for loss in losses)
    first, last = sum(losses[:8]) / 8, sum(losses[-8:]) / 8
    assert last < 0.9 * first, f"{family}: mean loss {first:.3f} -> {last:.3f}"


def test_a3c_policy_learns_the_hidden_rule():
    workload = build_workload("A3C", seed=0)
    observations, best = workload.data.tensors

    def greedy_accuracy() -> float:
        with torch.no_grad():
            logits, _ = workload.model(observations)
        return float((logits.argmax(1) == best).float().mean())

    before = greedy_accuracy()
    for index in range(300):
        workload.train_step(index * 32, 32)
    after = greedy_accuracy()
    assert after > before + 0.2, f"greedy accuracy {before:.2f} -> {after:.2f}"


def test_same_seed_same_weights_and_data_other_seed_differs():
    a, b, c = (build_workload("LM", seed) for seed in (3, 3, 4))
    for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(x, y)
    assert torch.equal(a.batch(100, 8)[0], b.batch(100, 8)[0])
    assert not torch.equal(a.batch(100, 8)[0], c.batch(100, 8)[0])


def test_data_position_spans_epochs_and_visits_every_sample_once_per_epoch():
    workload = build_workload("Recommendation", seed=0)
    sampler = workload.data
    n = sampler.num_samples
    order = sampler.indices(0, n)
    assert sorted(order.tolist()) == list(range(n))
    # A batch across the epoch boundary = the end of epoch 0 + the start of epoch 1.
    across = sampler.indices(n - 3, 6)
    assert torch.equal(across[:3], order[-3:])
    assert torch.equal(across[3:], sampler.indices(n, 3))
    assert not torch.equal(sampler.indices(n, n), order)  # reshuffled
