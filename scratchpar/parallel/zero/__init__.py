"""ZeRO: data parallelism that stops replicating optimizer state, gradients and parameters."""

from .base import ZeRO
from .stage1 import ZeRO1
from .stage2 import ZeRO2
from .stage3 import ZeRO3

STAGES = {1: ZeRO1, 2: ZeRO2, 3: ZeRO3}

__all__ = ["STAGES", "ZeRO", "ZeRO1", "ZeRO2", "ZeRO3"]
