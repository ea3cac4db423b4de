"""Parameter servers: workers push gradients to the servers that own their key ranges and pull
the parameters back (Li et al. 2014, ps-lite; Dean et al. 2012, DistBelief)."""

from .arrival_order import ArrivalOrderParameterServer
from .downpour import AsyncParameterServer
from .locked import LockedParameterServer
from .ranges import KeyRanges
from .ssp import SSPParameterServer
from .sync import SyncParameterServer
from .warmup import SyncThenAsync

__all__ = ["ArrivalOrderParameterServer", "AsyncParameterServer", "KeyRanges",
           "LockedParameterServer", "SSPParameterServer", "SyncParameterServer", "SyncThenAsync"]
