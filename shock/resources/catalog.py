"""Which resource profile a job type uses.

Synergy traces name Synergy's models (`res18`, `gnmt`, ...) as their job type. Gavel's job
types map to the Synergy profile of the same or the closest model:

| Gavel family | profile | why |
|---|---|---|
| ResNet-18 | res18 | same model (Gavel trains it on CIFAR-10, Synergy profiled ImageNet) |
| ResNet-50 | res50 | same model |
| Transformer | transformer | same model |
| LM | lstm | Gavel's LM is an LSTM language model |
| Recommendation | vae | an autoencoder for collaborative filtering, like Synergy's VAE |
| A3C, CycleGAN | none | no comparable profile: fair-share profile (keeps the GPU share) |

Anything else also gets the fair-share profile.

A job whose trace records the CPUs and memory it asked for (an imported production trace)
keeps its model's sensitivity matrix but takes its request as its best case: the placements
aim to give it what it asked, and its speed with any grant is read off the matrix.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from shock.core.resource_placement import ResourceRequest
from shock.resources.profiles import ResourceProfile, fair_share_profile, synergy_profiles

GAVEL_FAMILY_PROFILES = {
    "ResNet-18": "res18",
    "ResNet-50": "res50",
    "Transformer": "transformer",
    "LM": "lstm",
    "Recommendation": "vae",
}


@cache
def profile_for(job_type: str) -> ResourceProfile:
    profiles = synergy_profiles()
    if job_type in profiles:
        return profiles[job_type]
    family = job_type.split(" ", 1)[0]
    mapped = GAVEL_FAMILY_PROFILES.get(family)
    if mapped is not None:
        return profiles[mapped]
    return fair_share_profile(family)


def profile_for_request(request: ResourceRequest) -> ResourceProfile:
    """The profile a unit is placed by: its job type's, with its own request as the best case
    where its trace gave one."""
    if request.demand is None:
        return profile_for(request.job_type)
    return profile_with_demand(request.job_type, request.demand)


@cache
def profile_with_demand(
    job_type: str, demand: tuple[float | None, float | None]
) -> ResourceProfile:
    """`job_type`'s profile whose best case is `demand` (CPUs, GB per GPU); a None keeps the
    profile's own best case for that resource."""
    base = profile_for(job_type)
    cpus = base.best_cpus_per_gpu if demand[0] is None else demand[0]
    memory = base.best_mem_gb_per_gpu if demand[1] is None else demand[1]
    return replace(
        base,
        best_cpus_per_gpu=cpus,
        best_mem_gb_per_gpu=memory,
        speedup=base.speed(cpus, memory),
    )
