"""Expert parallelism: a sparse layer's experts split over the ranks of an ep group, which
send each token to its experts' ranks and back with all-to-all-v, and routing taken over the
whole micro-batch, whichever ranks hold its tokens (Lepikhin et al. 2020, GShard; Fedus et al.
2021, Switch Transformer; Liu et al. 2025, Megatron-Core's parallel folding)."""

from .group import ExpertError, ExpertGroup
from .held import HeldExperts, expert_parallel, expert_parameters, experts_over

__all__ = ["ExpertError", "ExpertGroup", "HeldExperts", "expert_parallel", "expert_parameters",
           "experts_over"]
