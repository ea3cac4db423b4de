"""Peak bytes per part, counted from the buffers a strategy holds whenever it samples them."""

from __future__ import annotations

from ...autograd.held import buffer
from ...backend import get_array_module


class Ledger:
    """What one rank holds, by part (parameters, gradients, optimizer, …), at its peak.

    :meth:`sample` is handed the arrays each part holds right now; every buffer is counted
    once, views included, under the first part that names it, so a figure is the memory those
    arrays occupy, not a sum of shapes. ``peak[part]`` is each part's largest sample, and
    ``at_peak`` the parts at the sample whose total was the largest."""

    def __init__(self):
        self.peak: dict[str, int] = {}
        self.at_peak: dict[str, int] = {}
        self.samples = 0

    def sample(self, parts: dict[str, list]) -> dict[str, int]:
        """Count each part's distinct buffers; return the figures, and keep the peaks."""
        held, now = [], {}
        for part, arrays in parts.items():
            total = 0
            for a in arrays:
                if a is None:
                    continue
                owner = buffer(a)
                if owner.nbytes and not _counted(owner, held):
                    held.append(owner)
                    total += int(owner.nbytes)
            now[part] = total
            self.peak[part] = max(self.peak.get(part, 0), total)
        if sum(now.values()) >= sum(self.at_peak.values()):
            self.at_peak = now
        self.samples += 1
        return now

    def total(self) -> int:
        """The largest total of one sample."""
        return sum(self.at_peak.values())


def _counted(owner, held) -> bool:
    xp = get_array_module(owner)
    return any(get_array_module(b) is xp and xp.may_share_memory(owner, b) for b in held)
