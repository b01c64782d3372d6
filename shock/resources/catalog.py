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
"""

from __future__ import annotations

from functools import cache

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
