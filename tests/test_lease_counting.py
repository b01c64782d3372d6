"""Lease opportunities count last round's units that are still here, however they left."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from shock.core.model import JobSpec
from shock.core.plugins import default_registry
from shock.core.run import MechanismConfig
from shock.core.solver import SolverSpec
from shock.core.throughputs import default_throughputs
from shock.engine.cluster_spec import parse_cluster
from shock.engine.mechanism import Mechanism

TABLE = default_throughputs()


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    policy=st.sampled_from(["max_min_fairness", "max_min_fairness_packed"]),
)
def test_opportunities_are_last_rounds_units_still_tracked(seed: int, policy: str) -> None:
    rng = random.Random(seed)
    registry = default_registry()
    mechanism = Mechanism(
        parse_cluster("3:2:2", 1),
        registry.get("policy", policy).for_run(seed),
        SolverSpec(),
        registry.get("placement", "first_fit"),
        TABLE,
        MechanismConfig(round_length_s=360.0, seed=seed),
    )
    keys = sorted(k for k in TABLE.isolated if k[1] == 1)
    next_id, now = 0, 0.0
    for _ in range(12):
        for _ in range(rng.randrange(4)):
            job_type, scale = rng.choice(keys)
            mechanism.admit(JobSpec(next_id, job_type, rng.choice([500, 10**12]), scale))
            next_id += 1
        if mechanism.active and rng.random() < 0.4:
            mechanism.withdraw(rng.choice(sorted(mechanism.active)))
        if mechanism.active and rng.random() < 0.4:
            # A batch-size change: the job's pairs are dropped, and may be paired again.
            job = mechanism.active[rng.choice(sorted(mechanism.active))]
            mechanism.change_job_type(job, rng.choice(keys)[0], 10**12, job.steps_done)
        before = mechanism.stats.lease_opportunities
        previous = set(mechanism.previous_round)
        assignments = mechanism.plan_round(now)
        # After the plan (which may pair jobs anew): last round's units tracked now.
        tracked = set(mechanism.active) | set(mechanism.pairs)
        assert mechanism.stats.lease_opportunities - before == len(previous & tracked)
        for assignment in assignments:
            steps = [rng.choice([1.0, 10**6]) for _ in assignment.unit.members]
            mechanism.credit(assignment, steps, 360.0)
        now += 360.0
