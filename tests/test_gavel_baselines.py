"""Options `--preset gavel` sets so that fifo_perf and gandiva follow Gavel's simulator:
hand-made instances whose allocations are worked out by hand, and the preset wiring."""

from __future__ import annotations

import numpy as np
import pytest

from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.policy import Allocation, Policy, PolicyInput, PolicyJob, UnitKey
from shock.core.run import MechanismConfig
from shock.core.solver import SolverSpec
from shock.core.throughputs import default_throughputs
from shock.engine.cluster_spec import parse_cluster
from shock.engine.mechanism import Mechanism
from shock.engine.presets import get_preset
from shock.engine.runner import RunOptions, build_request
from shock.plugins.policies.fifo import Fifo
from shock.plugins.policies.gandiva import Gandiva

TABLE = default_throughputs()
TYPES = ("k80", "p100", "v100")
SOLVER = SolverSpec()


def problem(
    capacity: tuple[float, ...],
    jobs: list[tuple[str, int]],
    throughputs: list[list[float]] | None = None,
    job_ids: list[int] | None = None,
) -> PolicyInput:
    """Jobs (type, gang size); throughputs from Gavel's table unless given (rows by TYPES)."""
    ids = job_ids if job_ids is not None else list(range(len(jobs)))
    policy_jobs = tuple(
        PolicyJob(job_id, job_type, gang, 1.0, 0.0, 1000, 0.0)
        for job_id, (job_type, gang) in zip(ids, jobs, strict=True)
    )
    if throughputs is None:
        throughputs = [[TABLE.throughput(t, gang, w) for w in TYPES] for t, gang in jobs]
    return PolicyInput(
        0.0, policy_jobs, TYPES, np.array(capacity, float), np.array(throughputs, float),
        table=TABLE,
    )  # fmt: skip


def rows(allocation: Allocation) -> dict[object, list[float]]:
    return {
        key: [round(float(v), 9) for v in row]
        for key, row in zip(allocation.keys, allocation.fractions, strict=True)
    }


def placed(allocation: Allocation) -> dict[object, str]:
    return {
        key: allocation.worker_types[int(np.argmax(row))]
        for key, row in zip(allocation.keys, allocation.fractions, strict=True)
        if row.max() > 0
    }


# ------------------------------------------------------------------------------ fifo_perf


def gavel_fifo_perf() -> Fifo:
    return Fifo(heterogeneity_aware=True).with_options({"gavel_queue": "true"})


def test_gavel_queue_passes_over_a_gang_that_has_room_only_where_it_cannot_run() -> None:
    # Job 0 takes the P100 (its fastest). Job 1, a 4-GPU gang, has room only on the four K80s,
    # where it runs at 0 steps/s; job 2 runs anywhere.
    p = problem(
        (4, 1, 0),
        [("A3C", 1), ("ResNet-50 (batch size 128)", 4), ("A3C", 1)],
        throughputs=[[1.0, 2.0, 0.0], [0.0, 5.0, 0.0], [1.0, 2.0, 0.0]],
    )
    # shock's queue stops at job 1; Gavel's passes it over and gives job 2 a K80.
    assert placed(Fifo(heterogeneity_aware=True).allocate(p, SOLVER)) == {0: "p100"}
    assert placed(gavel_fifo_perf().allocate(p, SOLVER)) == {0: "p100", 2: "k80"}


def test_gavel_queue_on_agnostic_fifo_passes_over_the_same_gang() -> None:
    # fifo draws job 0's type. On the P100, job 1 has room only on the K80s, where it cannot
    # run: passed over, and job 2 takes a K80. On a K80, job 1 has room nowhere: the queue
    # stops.
    p = problem(
        (4, 1, 0),
        [("A3C", 1), ("ResNet-50 (batch size 128)", 4), ("A3C", 1)],
        throughputs=[[1.0, 2.0, 0.0], [0.0, 5.0, 0.0], [1.0, 2.0, 0.0]],
    )
    outcomes = []
    for seed in range(10):
        fifo = Fifo(heterogeneity_aware=False).with_options({"gavel_queue": "true"})
        outcomes.append(placed(fifo.for_run(seed).allocate(p, SOLVER)))
    assert all(o in ({0: "p100", 2: "k80"}, {0: "k80"}) for o in outcomes)
    assert {0: "p100", 2: "k80"} in outcomes and {0: "k80"} in outcomes


def test_gavel_queue_still_stops_at_a_job_with_room_nowhere() -> None:
    # Job 1 (8 GPUs) fits no type: the queue stops there and job 2 waits, in both variants.
    p = problem(
        (4, 1, 0),
        [("A3C", 1), ("A3C", 8), ("A3C", 1)],
        throughputs=[[1.0, 2.0, 0.0], [3.0, 3.0, 0.0], [1.0, 2.0, 0.0]],
    )
    assert placed(gavel_fifo_perf().allocate(p, SOLVER)) == {0: "p100"}
    assert placed(Fifo(heterogeneity_aware=True).allocate(p, SOLVER)) == {0: "p100"}


def test_gavel_queue_gives_equal_speeds_the_first_type_in_name_order() -> None:
    # Columns in non-alphabetical order: Gavel's tie goes to "k80", whatever its column.
    p = PolicyInput(
        0.0,
        (PolicyJob(0, "A3C", 1, 1.0, 0.0, 1000, 0.0),),
        ("v100", "k80"),
        np.array([1.0, 1.0]),
        np.array([[2.0, 2.0]]),
    )
    assert placed(gavel_fifo_perf().allocate(p, SOLVER)) == {0: "k80"}
    assert placed(Fifo(heterogeneity_aware=True).allocate(p, SOLVER)) == {0: "v100"}


# -------------------------------------------------------------------------------- gandiva


def gavel_gandiva(seed: int = 0) -> Gandiva:
    return Gandiva().with_options({"gavel_packing": "true"}).for_run(seed)


def test_gavel_packing_gives_each_unit_an_equal_share_of_gpus_over_its_gang() -> None:
    # 9 GPUs asked for, 6 there: two units (the gangs differ, so every draw is wasted).
    # Each gets 2/2 = 1 GPU of every type: the 8-GPU gang a time fraction 1/8 per type
    # (3/8 in all), the single job 1 per type, scaled down to 1/3 each.
    p = problem((2, 2, 2), [("ResNet-18 (batch size 32)", 8), ("A3C", 1)])
    assert rows(gavel_gandiva().allocate(p, SOLVER)) == {
        0: [0.125] * 3,
        1: [pytest.approx(1 / 3)] * 3,
    }
    # shock's own Gandiva gives both units the same time fraction, 2/9 per type.
    assert rows(Gandiva().allocate(p, SOLVER)) == {
        0: [pytest.approx(2 / 9)] * 3,
        1: [pytest.approx(2 / 9)] * 3,
    }


def test_gavel_packing_pairs_nobody_while_the_gangs_fit() -> None:
    # Two jobs, three GPUs: no pairs; each unit's share 1/2 per type, 3/2 in all, scaled to 1.
    p = problem((1, 1, 1), [("A3C", 1), ("ResNet-18 (batch size 32)", 1)])
    assert rows(gavel_gandiva().allocate(p, SOLVER)) == {
        0: [pytest.approx(1 / 3)] * 3,
        1: [pytest.approx(1 / 3)] * 3,
    }


def test_gavel_packing_pairs_when_oversubscribed_and_frees_the_partner_of_a_leaver() -> None:
    one_gpu = (1, 0, 0)
    p = problem(one_gpu, [("A3C", 1), ("ResNet-18 (batch size 32)", 1)])
    policy = gavel_gandiva()
    # Two jobs on one GPU: the only draw pairs them; the pair gets the whole K80.
    assert rows(policy.allocate(p, SOLVER)) == {(0, 1): [1, 0, 0], 0: [0] * 3, 1: [0] * 3}
    # Job 0 leaves: its partner runs alone.
    alone = problem(one_gpu, [("ResNet-18 (batch size 32)", 1)], job_ids=[1])
    assert rows(policy.allocate(alone, SOLVER)) == {1: [1, 0, 0]}


def test_gavel_packing_drops_a_bad_pair_and_may_draw_it_again() -> None:
    # A3C with ResNet-50 (batch size 128) runs at 0 packed on some type: Gavel's summed
    # normalised throughput is 0, so the pair is dropped at each allocation, and with no
    # other candidate, drawn again. shock's own Gandiva rejects it for good.
    p = problem((1, 0, 0), [("A3C", 1), ("ResNet-50 (batch size 128)", 1)])
    policy = gavel_gandiva()
    for _ in range(3):
        assert (0, 1) in policy.allocate(p, SOLVER).keys
    own = Gandiva()
    for _ in range(3):
        assert (0, 1) not in own.allocate(p, SOLVER).keys


def test_gavel_packing_keeps_a_pair_good_summed_over_types_but_not_on_its_best() -> None:
    # Two Recommendation (batch size 512) jobs: 0.996 on their best type, 2.25 summed over
    # the three. Gavel keeps the pair (still kept when the next allocation, on two GPUs,
    # needs no packing); shock's own Gandiva rejects it.
    job = ("Recommendation (batch size 512)", 1)
    policy = gavel_gandiva()
    assert (0, 1) in policy.allocate(problem((1, 0, 0), [job, job]), SOLVER).keys
    policy.allocate(problem((2, 0, 0), [job, job]), SOLVER)
    assert kept_pairs(policy) == [(0, 1)]
    own = Gandiva()
    assert (0, 1) not in own.allocate(problem((1, 0, 0), [job, job]), SOLVER).keys


def test_gavel_packing_drops_a_bad_pair_at_the_next_allocation() -> None:
    bad = [("A3C", 1), ("ResNet-50 (batch size 128)", 1)]
    policy = gavel_gandiva()
    assert (0, 1) in policy.allocate(problem((1, 0, 0), bad), SOLVER).keys
    policy.allocate(problem((2, 0, 0), bad), SOLVER)
    assert kept_pairs(policy) == []


def kept_pairs(policy: Gandiva) -> list[tuple[int, int]]:
    return [tuple(pair) for pair in policy.snapshot()["kept"]]  # type: ignore[misc]


def test_gavel_packing_draws_as_gavel_does() -> None:
    # Gavel draws `Random(seed).sample(unpaired jobs in id order, 2)` once per unpaired job.
    import random

    jobs = [("A3C", 1)] * 3 + [("A3C", 2)] * 3
    p = problem((1, 1, 1), jobs)
    for seed in range(5):
        rng = random.Random(seed)
        unpaired, expected = list(range(6)), set()
        for _ in range(6):
            if len(unpaired) < 2:
                break
            a, b = rng.sample(unpaired, 2)
            if jobs[a][1] == jobs[b][1]:
                unpaired.remove(a)
                unpaired.remove(b)
                expected.add((min(a, b), max(a, b)))
        keys = gavel_gandiva(seed).allocate(p, SOLVER).keys
        assert {k for k in keys if isinstance(k, tuple)} == expected


def test_the_gavel_preset_sets_its_baselines_options() -> None:
    registry = default_registry()
    preset = get_preset("gavel", registry)
    assert preset.options_for("fifo_perf") == ("gavel_queue=true",)
    assert preset.options_for("gandiva") == ("gavel_packing=true",)
    # Gavel's simulator takes ECOS's point for max_sum_throughput_perf.
    assert "ecos_point=true" in preset.options_for("max_sum_throughput_perf")
    assert get_preset("default", registry).options_for("gandiva") == ()


def test_the_gavel_preset_alone_solves_max_sum_throughput_at_ecos_point() -> None:
    request = build_request(RunOptions(preset="gavel", policy="max_sum_throughput_perf"))
    assert request.policy.options.ecos_point
    plain = build_request(RunOptions(policy="max_sum_throughput_perf"))
    assert not plain.policy.options.ecos_point


# ------------------------------------------------------- the mechanism under Gavel's rule


class FixedShares(Policy):
    """Gives the units it was built with these shares of the K80s, whatever the jobs."""

    name = "fixed_shares"
    description = "a fixed allocation, for mechanism tests"
    backfill = False

    def __init__(self, shares: dict[UnitKey, float]) -> None:
        self.shares = shares

    def allocate(self, problem: PolicyInput, solver: SolverSpec) -> Allocation:
        keys = tuple(self.shares)
        rows = np.zeros((len(keys), len(problem.worker_types)))
        rows[:, problem.worker_types.index("k80")] = [self.shares[k] for k in keys]
        return Allocation(keys, problem.worker_types, rows)


def first_round(shares: dict[UnitKey, float], jobs: int, selection: str) -> set[UnitKey]:
    """What runs on the one K80 in the first round, jobs all ResNet-18 (batch size 32)."""
    config = MechanismConfig(round_length_s=360.0, selection=selection)
    mechanism = Mechanism(
        parse_cluster("k80=1", 1), FixedShares(shares), SOLVER,
        default_registry().get("placement", "first_fit"), TABLE, config,
    )  # fmt: skip
    for job_id in range(jobs):
        mechanism.admit(JobSpec(job_id, "ResNet-18 (batch size 32)", 10**9))
    return {assignment.unit.key for assignment in mechanism.plan_round(0.0)}


def test_gavel_rule_breaks_ties_in_the_order_of_gavels_priority_table() -> None:
    # Two new pairs with equal shares tie on every key. Gavel's table lists job 2's pairs
    # (1, 2) before job 3's (0, 3); the time-owed rule takes pairs in key order.
    shares: dict[UnitKey, float] = {(0, 3): 0.5, (1, 2): 0.5, 0: 0, 1: 0, 2: 0, 3: 0}
    assert first_round(shares, 4, "gavel") == {(1, 2)}
    assert first_round(shares, 4, "deficit") == {(0, 3)}


def test_gavel_rule_gives_a_new_pair_a_half_round_of_credit() -> None:
    # Job 0 alone with share 0.6, pair (1, 2) with 0.4. Both start with half a round of
    # credit in Gavel, so job 0, owed more, runs first. Without the credit the pair would
    # have received nothing yet, its priority 0.4 x 1e9, and it would run first.
    shares: dict[UnitKey, float] = {0: 0.6, (1, 2): 0.4, 1: 0, 2: 0}
    assert first_round(shares, 3, "gavel") == {0}
