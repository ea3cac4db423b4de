"""A layout's memory per rank against a cluster's: the training command's own estimate
(``train/memory.py``: the model states each strategy's description holds, activations, data,
the runtime), set beside what a device of the profile may hold."""

from __future__ import annotations

from dataclasses import dataclass

from ..train.memory import estimate


@dataclass(frozen=True)
class Fit:
    """Bytes a rank is expected to need by part, the bound the training command refuses a run
    by (an op's temporaries allowed for), and the bytes the device may hold."""

    parts: dict[str, int]
    bound: int
    have: int

    @property
    def need(self) -> int:
        return sum(self.parts.values())

    @property
    def fits(self) -> bool:
        """Whether the training command, on this device, would start the run."""
        return self.bound <= self.have

    def why_not(self) -> str:
        """Empty where it fits; else the shortfall and the largest part, in a phrase."""
        if self.fits:
            return ""
        part, size = max(self.parts.items(), key=lambda item: item[1])
        return (f"needs {self.bound / 2**30:.1f} GiB per rank, {self.have / 2**30:.1f} GiB "
                f"available: {part} {size / 2**30:.1f} GiB is the largest part")


def per_rank(cfg, world: int, profile, budget: int | None = None) -> Fit:
    """The peak a rank of ``cfg`` on ``world`` ranks needs, against the profile's device (or
    ``budget`` bytes) less what a process maps before its arrays."""
    have = profile.device.memory_bytes if budget is None else budget
    return Fit(estimate(cfg, world, bound=False, planning=True),
               sum(estimate(cfg, world, planning=True).values()),
               have - profile.engine.process_bytes)
