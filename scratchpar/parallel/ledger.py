"""Peak bytes per part, counted from the buffers a strategy holds, sampled at its moments."""

from __future__ import annotations

from ..autograd.held import buffer, graph_bytes
from ..backend import get_array_module
from .probe import Probe


class Ledger(Probe):
    """What one rank holds, by part (parameters, gradients, optimizer, …), at its peak.

    :meth:`sample` is handed the arrays each part holds right now. Every buffer is counted
    once, views included, under the first part that names it, so a figure is the memory those
    arrays occupy, not a sum of shapes. ``peak[part]`` is each part's largest sample, and
    ``at_peak`` the parts at the sample whose total was the largest.

    Attached to a strategy (``strategy.attach(Ledger())``), it samples the strategy's
    ``holdings()`` at every moment where they may change, and after each forward keeps
    :attr:`activations`, the bytes the autograd graph held at the end of the largest."""

    needs = frozenset({"forward", "moment"})

    def __init__(self):
        self.peak: dict[str, int] = {}
        self.at_peak: dict[str, int] = {}
        self.samples = 0
        self.activations = 0
        self.holdings = None

    def bind(self, strategy) -> None:
        self.holdings = strategy.holdings

    def forward(self, loss, params) -> None:
        """The graph's bytes beside the parameters, and a sample."""
        self.activations = max(self.activations, graph_bytes(loss, params))
        self.moment()

    def moment(self) -> None:
        self.sample(self.holdings())

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
