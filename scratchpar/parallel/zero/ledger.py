"""Peak bytes per part, counted from the buffers a strategy holds, sampled at its hooks."""

from __future__ import annotations

from ...autograd.held import buffer, graph_bytes
from ...backend import get_array_module


class Ledger:
    """What one rank holds, by part (parameters, gradients, optimizer, …), at its peak.

    :meth:`sample` is handed the arrays each part holds right now. Every buffer is counted
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


class Meter:
    """When a strategy's holdings are counted: ``held()`` (arrays by part) is sampled into a
    :class:`Ledger` after each hook that :meth:`after` wraps (a collective's start or finish, a
    module's forward hook) and at the step's boundaries (:meth:`sample`, :meth:`forward`). The
    strategy's algorithm never names the ledger. Without ``measure``, there is no ledger: a
    wrapped hook is the bare function, and nothing is sampled or costs anything."""

    def __init__(self, held, measure: bool):
        self.held = held
        self.ledger = Ledger() if measure else None
        self.activations = 0  # bytes the autograd graph held at the end of the largest forward

    def sample(self) -> None:
        """Count what is held now (with a ledger)."""
        if self.ledger is not None:
            self.ledger.sample(self.held())

    def forward(self, out, params) -> None:
        """After forward: the graph's bytes beside the parameters, and a sample."""
        if self.ledger is not None:
            self.activations = max(self.activations, graph_bytes(out, params))
            self.sample()

    def after(self, hook):
        """``hook``, followed by a sample (with a ledger), or ``hook`` itself (without)."""
        if self.ledger is None:
            return hook

        def sampled(*args):
            out = hook(*args)
            self.sample()
            return out

        return sampled


def _counted(owner, held) -> bool:
    xp = get_array_module(owner)
    return any(get_array_module(b) is xp and xp.may_share_memory(owner, b) for b in held)
