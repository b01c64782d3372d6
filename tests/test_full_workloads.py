"""The full-size reference models build at their published sizes and take one training step
on the CPU at a reduced batch (CycleGAN and ResNet-50 on smaller images: the networks are
fully convolutional, and a 256x256 CycleGAN step takes ~50 s on one core)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the full-size workloads need PyTorch (shock[cluster])")

from shock.workloads.full.workload import build_full_workload  # noqa: E402

# Parameter counts of the published models (millions): torchvision's ResNet-50 has
# 25,557,032; the CIFAR ResNet-18 11,173,962; CycleGAN's generator 11.378M and its
# discriminator 2.765M (x2 each).
PARAMETERS_M = {
    "ResNet-18": 11.17,
    "ResNet-50": 25.56,
    "CycleGAN": 28.29,
    "LM": 13.99,  # 2 x 33,278 x 200 embedding/decoder + two 200-wide LSTM layers
    "Recommendation": 31.77,  # (138,493 + 26,744) x (64 + 128) embeddings + towers
}


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.mark.parametrize(
    ("family", "batch_size"), [("ResNet-18", 2), ("LM", 2), ("Recommendation", 64), ("A3C", 4)]
)
def test_a_step_on_generated_data(family: str, batch_size: int) -> None:
    workload = build_full_workload(family, seed=0)
    before = [p.detach().clone() for p in workload.model.parameters()]
    loss = workload.train_step(0, batch_size)
    assert loss == loss and loss > 0  # finite
    moved = sum(
        not torch.equal(a, b) for a, b in zip(before, workload.model.parameters(), strict=True)
    )
    assert moved > 0
    if family in PARAMETERS_M:
        total = sum(p.numel() for p in workload.model.parameters()) / 1e6
        assert total == pytest.approx(PARAMETERS_M[family], abs=0.01)


def test_batches_depend_only_on_position_and_size() -> None:
    workload = build_full_workload("LM", seed=3)
    first = workload.batch(128, 4)[0]
    workload.batch(0, 4)
    assert torch.equal(first, workload.batch(128, 4)[0])
    assert not torch.equal(first, workload.batch(132, 4)[0])


def _step(workload: object, batch: tuple[torch.Tensor, ...]) -> float:
    optimizer = workload.optimizer  # type: ignore[attr-defined]
    optimizer.zero_grad(set_to_none=True)
    loss = workload.loss(workload.model, batch)  # type: ignore[attr-defined]
    loss.backward()
    optimizer.step()
    return float(loss.item())


def test_resnet50_steps_on_small_images() -> None:
    workload = build_full_workload("ResNet-50", seed=0)
    total = sum(p.numel() for p in workload.model.parameters()) / 1e6
    assert total == pytest.approx(PARAMETERS_M["ResNet-50"], abs=0.01)
    images, labels = torch.randn(2, 3, 64, 64), torch.tensor([3, 999])
    assert _step(workload, (images, labels)) > 0
    full = workload.batch(0, 1)
    assert full[0].shape == (1, 3, 224, 224)


def test_transformer_steps_on_short_sentences() -> None:
    workload = build_full_workload("Transformer", seed=0)
    source, target = workload.batch(0, 2)
    assert source.shape == (2, 32)
    assert _step(workload, (source[:, :8], target[:, :8])) > 0


def test_cycle_gan_steps_on_small_images() -> None:
    workload = build_full_workload("CycleGAN", seed=0)
    total = sum(p.numel() for p in workload.model.parameters()) / 1e6
    assert total == pytest.approx(PARAMETERS_M["CycleGAN"], abs=0.01)
    a, b = torch.rand(1, 3, 64, 64) * 2 - 1, torch.rand(1, 3, 64, 64) * 2 - 1
    assert _step(workload, (a, b)) > 0


def test_profile_measures_the_full_size_models(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from shock.cli.app import app
    from shock.core.throughputs import load_throughputs

    output = tmp_path / "h200.json"
    result = CliRunner().invoke(
        app,
        ["profile", "--workload-size", "full", "--job-type", "A3C", "--gpu-type", "h200",
         "--seconds", "0.05", "--warmup-steps", "1", "--output", str(output)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert load_throughputs(output).throughput("A3C", 1, "h200") > 0
