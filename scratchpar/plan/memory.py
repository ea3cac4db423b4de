"""A layout's memory per rank against a cluster's: the training command's own estimate
(``train/memory.py``: the model states each strategy's description holds, activations, data,
the runtime), set beside what a device of the profile may hold."""

from __future__ import annotations

from dataclasses import dataclass

from ..train.memory import estimate


@dataclass(frozen=True)
class Fit:
    """Bytes a rank needs by part, the bytes the device may hold, and whether they fit."""

    parts: dict[str, int]
    have: int

    @property
    def need(self) -> int:
        return sum(self.parts.values())

    @property
    def fits(self) -> bool:
        return self.need <= self.have

    def why_not(self) -> str:
        """Empty where it fits; else the shortfall and the largest part, in a phrase."""
        if self.fits:
            return ""
        part, size = max(self.parts.items(), key=lambda item: item[1])
        return (f"needs {self.need / 2**30:.1f} GiB per rank, {self.have / 2**30:.1f} GiB "
                f"available: {part} {size / 2**30:.1f} GiB is the largest part")


def per_rank(cfg, world: int, profile) -> Fit:
    """The peak a rank of ``cfg`` on ``world`` ranks needs, against the profile's device less
    what a process maps before its arrays."""
    return Fit(estimate(cfg, world), profile.device.memory_bytes - profile.engine.process_bytes)
