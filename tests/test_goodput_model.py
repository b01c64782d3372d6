"""Pollux's goodput model against hand-worked values, its fit, and the bundled applications."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from shock.goodput.model import (
    BatchLimits,
    GoodputModel,
    GradParams,
    PerfParams,
    efficiency,
    network_time,
    step_time,
    sync_time,
)

PERF = PerfParams(
    alpha_c=0.1, beta_c=0.01, alpha_n=0.5, beta_n=0.05, alpha_r=0.2, beta_r=0.02, gamma=1.0
)


def test_step_time_by_hand() -> None:
    # One GPU, atomic batch 10: compute 0.1 + 0.01 x 10 = 0.2 s, no network.
    assert step_time(PERF, 1, 1, 10, 0) == pytest.approx(0.2)
    # Two accumulation steps add two more computes: 0.2 x 2 + 0.2.
    assert step_time(PERF, 1, 1, 10, 2) == pytest.approx(0.6)
    # 4 GPUs on one node: intra-node 0.2 + 0.02 x (4 - 2) = 0.24; gamma 1 adds them up.
    assert network_time(PERF, 1, 4) == pytest.approx(0.24)
    assert step_time(PERF, 1, 4, 10, 0) == pytest.approx(0.2 + 0.24)
    # 8 GPUs on 2 nodes: inter-node 0.5 + 0.05 x 6 = 0.8.
    assert network_time(PERF, 2, 8) == pytest.approx(0.8)
    assert step_time(PERF, 2, 8, 10, 0) == pytest.approx(1.0)


def test_overlap_exponent() -> None:
    # gamma 2: sqrt(0.3^2 + 0.4^2) = 0.5; a large gamma approaches max(0.3, 0.4).
    assert sync_time(PerfParams(0, 0, 0, 0, 0, 0, 2.0), np.array(0.3), np.array(0.4)) == (
        pytest.approx(0.5)
    )
    assert sync_time(PerfParams(0, 0, 0, 0, 0, 0, 10.0), np.array(0.3), np.array(0.4)) == (
        pytest.approx(0.4, rel=0.01)
    )


def test_efficiency_from_the_noise_scale() -> None:
    grad = GradParams(sqr=1.0, var=4.0)
    # phi = M0 var / sqr = 100 x 4 = 400; EFF(500) = (400 + 100) / (400 + 500) = 5/9.
    assert grad.noise_scale(100) == pytest.approx(400.0)
    assert efficiency(grad, 100, 500) == pytest.approx(5 / 9)
    assert efficiency(grad, 100, 100) == pytest.approx(1.0)
    # No gradient noise: twice the batch does half the good per sample.
    assert efficiency(GradParams(1.0, 0.0), 100, 200) == pytest.approx(0.5)
    # A zero gradient norm: every batch size is as good.
    assert efficiency(GradParams(0.0, 1.0), 100, 800) == pytest.approx(1.0)


def test_goodput_is_throughput_times_efficiency() -> None:
    limits = BatchLimits(
        init_batch_size=10, max_batch_size=1000, min_local_bsz=1, max_local_bsz=100
    )
    model = GoodputModel(PERF, GradParams(sqr=1.0, var=4.0), limits)
    # One GPU, batch 10: 10 samples in 0.2 s = 50/s; M = M0 so EFF = 1.
    assert model.goodput(1, 1, 10, 0) == pytest.approx(50.0)
    # 4 GPUs x 10 on one node: 40 samples in 0.44 s; phi = 40, EFF = 50/80.
    assert model.goodput(1, 4, 10, 0) == pytest.approx(40 / 0.44 * 50 / 80)


def test_best_batch_size_follows_the_noise() -> None:
    limits = BatchLimits(init_batch_size=16, max_batch_size=1024, min_local_bsz=4, max_local_bsz=64)
    # Noise-free gradients: goodput = M0 / step time, so the smallest batch wins.
    quiet = GoodputModel(PERF, GradParams(sqr=1.0, var=0.0), limits)
    best = quiet.best_config(1, 1)
    assert best.batch_size.item() == 16 and best.accum_steps.item() == 0
    # Pure noise (EFF = 1): goodput is throughput, which grows with the batch: the largest
    # batch, on one GPU as 16 micro-batches of 64 (accumulation).
    noisy = GoodputModel(PERF, GradParams(sqr=0.0, var=1.0), limits)
    best = noisy.best_config(1, 1)
    assert best.batch_size.item() == 1024
    assert best.atomic_bsz.item() == 64 and best.accum_steps.item() == 15
    # Without accumulation one GPU holds at most 64: the largest of the 50 batch sizes
    # sampled geometrically from 16 to 1024 that fits (62.2 -> 63; the next, 67.7, does not).
    assert noisy.best_config(1, 1, accumulation=False).batch_size.item() == 63


def test_best_config_is_the_best_of_its_candidates() -> None:
    limits = BatchLimits(
        init_batch_size=32, max_batch_size=4096, min_local_bsz=16, max_local_bsz=256
    )
    model = GoodputModel(PERF, GradParams(sqr=1.0, var=50.0), limits)
    for nodes, replicas in [(1, 1), (1, 3), (2, 8), (4, 16)]:
        best = model.best_config(nodes, replicas)
        got = best.goodput.item()
        assert got == pytest.approx(
            model.goodput(nodes, replicas, best.atomic_bsz.item(), best.accum_steps.item())
        )
        # No atomic batch size without accumulation does better by more than the step of
        # the geometric grid of 50 sampled batch sizes ((4096 / 32)^(1/49) = 1.104).
        for atomic in range(16, 257, 4):
            assert model.goodput(nodes, replicas, atomic, 0) <= got * 1.104


def test_too_many_gpus_for_the_batch_limits_have_no_goodput() -> None:
    limits = BatchLimits(init_batch_size=32, max_batch_size=256, min_local_bsz=32, max_local_bsz=64)
    model = GoodputModel(PERF, GradParams(1.0, 1.0), limits)
    assert limits.max_gpus == 8
    assert model.best_config(2, 8).goodput.item() > 0
    assert model.best_config(3, 9).goodput.item() == 0


def test_batch_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="init_batch_size"):
        BatchLimits(init_batch_size=64, max_batch_size=32, min_local_bsz=1, max_local_bsz=8)


needs_scipy = pytest.mark.skipif(
    importlib.util.find_spec("scipy") is None, reason="fitting needs scipy (shock[goodput])"
)


@needs_scipy
def test_fit_recovers_step_times() -> None:
    from shock.goodput.fit import StepTimes, fit_perf_params

    true = PerfParams(
        alpha_c=0.05, beta_c=0.002, alpha_n=0.3, beta_n=0.01, alpha_r=0.08, beta_r=0.004, gamma=1.5
    )
    rows = [
        (n, r, b)
        for n, r in [(1, 1), (1, 2), (1, 4), (2, 8), (4, 16), (3, 12)]
        for b in (16, 32, 64, 128)
    ]
    nodes, replicas, atomic = (np.array(c) for c in zip(*rows, strict=True))
    compute = true.alpha_c + true.beta_c * atomic
    measured = step_time(true, nodes, replicas, atomic, 0)
    fitted = fit_perf_params(StepTimes(nodes, replicas, atomic, compute, measured))
    predicted = step_time(fitted, nodes, replicas, atomic, 0)
    assert np.max(np.abs(np.log(predicted / measured))) < 0.05
    # The network and overlap terms the data determine come back.
    assert fitted.alpha_n == pytest.approx(0.3, rel=0.05)
    assert fitted.gamma == pytest.approx(1.5, rel=0.05)
    assert 1.0 <= fitted.gamma <= 10.0


@needs_scipy
def test_applications_fit_their_measurements() -> None:
    from shock.goodput import applications

    assert applications.names() == ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
    cifar = applications.application("cifar10")
    # Pollux's limits for cifar10: validated batch sizes 128..4096, measured atomic 32..1024.
    assert cifar.limits == BatchLimits(128, 4096, 32, 1024)
    assert cifar.max_epochs == 100
    assert applications.application("yolov3").limits.max_local_bsz == 8
    for name in applications.names():
        app = applications.application(name)
        data = app.step_times
        predicted = step_time(app.perf, data.num_nodes, data.num_replicas, data.atomic_bsz, 0)
        rmsle = math.sqrt(float(np.mean(np.log(predicted / data.step_time) ** 2)))
        # Pollux's model is smooth; the measurements are not (RMS log error 0.10 - 0.13).
        assert rmsle < 0.15, (name, rmsle)
        # Goodput is positive on one GPU and the gradient statistics are read per epoch.
        model = app.goodput_model(epoch=1)
        assert model.best_config(1, 1).goodput.item() > 0
        assert model.grad == app.validation[app.limits.init_batch_size][1].grad


@needs_scipy
def test_stored_fits_are_what_the_fit_gives() -> None:
    # shock/data/pollux/fitted.json keeps the fits; fitting again predicts the same times.
    from shock.goodput import applications
    from shock.goodput.fit import fit_perf_params

    app = applications.application("yolov3")
    data = app.step_times
    again = fit_perf_params(data)
    stored = step_time(app.perf, data.num_nodes, data.num_replicas, data.atomic_bsz, 0)
    fresh = step_time(again, data.num_nodes, data.num_replicas, data.atomic_bsz, 0)
    assert np.max(np.abs(np.log(stored / fresh))) < 0.01


def test_goodput_table_by_placement() -> None:
    from shock.goodput.speedup import GoodputTable, application_of, epoch_of

    limits = BatchLimits(init_batch_size=16, max_batch_size=128, min_local_bsz=16, max_local_bsz=64)
    model = GoodputModel(PERF, GradParams(sqr=1.0, var=4.0), limits)
    table = GoodputTable.of(model, max_nodes=3, gpus_per_node=4)
    # Placements that cannot exist have no goodput: no nodes, more nodes than GPUs, more GPUs
    # than the nodes hold; 12 GPUs need 12 x 16 > 128 samples.
    assert table.goodput[0, 0] == table.goodput[2, 1] == table.goodput[1, 5] == 0
    assert table.goodput[3, 12] == 0 and table.max_gpus == 8
    assert table.goodput[2, 8] > 0
    assert table.goodput[2, 8] == pytest.approx(model.best_config(2, 8).goodput.item())
    assert table.at(np.array([5]), np.array([1])).item() == 0  # outside the table
    # The fair share's goodput: 6 GPUs on two nodes.
    assert table.base_goodput(6) == pytest.approx(table.goodput[2, 6])
    linear = GoodputTable.linear(max_nodes=2, gpus_per_node=4)
    assert linear.goodput[2, 7] == 7 and linear.goodput[1, 5] == 0
    assert application_of("cifar10 (batch size 2048)") == "cifar10"
    assert application_of("ResNet-18 (batch size 32)") is None
    assert epoch_of("ResNet-18 (batch size 32)", 50, 100) == 0
