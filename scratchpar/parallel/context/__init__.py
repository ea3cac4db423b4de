"""Context parallelism: each rank of a cp group holds 1/cp of every sequence's positions, and
only attention communicates (ring, all-gather, Ulysses; Liu et al. 2023, Dubey et al. 2024,
Jacobs et al. 2023)."""

from .allgather import AllGatherAttention
from .gpt import SCHEMES, context_parallel
from .layout import Context, ContextError, future, positions
from .loss import context_loss, context_score
from .ring import RingAttention
from .traffic import traffic
from .ulysses import UlyssesAttention

__all__ = ["SCHEMES", "AllGatherAttention", "Context", "ContextError", "RingAttention",
           "UlyssesAttention", "context_loss", "context_parallel", "context_score", "future",
           "positions", "traffic"]
