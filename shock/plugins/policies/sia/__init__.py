"""`--policy sia`: Sia (SOSP'23), goodput-optimised configurations on heterogeneous GPUs.

- `policy`: the integer program and the grants it returns;
- `goodput`: Sia's configurations and each job's estimated goodput on them;
- `state`: what the policy remembers of each job between rounds.
"""

from shock.plugins.policies.sia.goodput import configurations
from shock.plugins.policies.sia.policy import Sia, SiaOptions, register_policies
from shock.plugins.policies.sia.state import Config

__all__ = ["Config", "Sia", "SiaOptions", "configurations", "register_policies"]
