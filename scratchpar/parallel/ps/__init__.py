"""Parameter servers: workers push gradients to the servers that own their key ranges and pull
the parameters back (Li et al. 2014, ps-lite; Dean et al. 2012, DistBelief)."""

from .ranges import KeyRanges

__all__ = ["KeyRanges"]
