"""Measurements attached to a strategy from outside: the algorithm names moments, a probe hears.

A strategy's step never names what measures it. It calls its :class:`Probes` at a few moments
(the rows its loss took, a gradient before its reduction, forward done, a point where what it
holds changes, the step's metrics) and ``strategy.attach(probe)`` adds a listener. With none
attached each moment is a loop over nothing. The gradient noise scale
(:class:`~scratchpar.parallel.noise.NoiseProbe`) and the memory ledger
(:class:`~scratchpar.parallel.ledger.Ledger`) are probes; so is anything a user writes.
"""

from __future__ import annotations


class Probe:
    """A measurement of a strategy's steps: override the moments it hears. ``needs``: the
    moments it cannot do without (attaching it to a strategy that does not name them is an
    error). ``shards``: into how many shards a one-device step must be cut for it to compare
    them (the noise scale needs two; data parallelism's ranks are its shards already)."""

    needs: frozenset = frozenset()
    shards = 1

    def bind(self, strategy) -> None:
        """Attached to ``strategy`` (read its communicator, its array module, its holdings)."""

    def shard(self, rows: int, units) -> None:
        """This rank's loss took ``rows`` rows and ``units`` units. After a :meth:`gradient`,
        a new shard of the same step begins (a one-device step cut in :attr:`shards`)."""

    def gradient(self, grad) -> None:
        """Part of this shard's summed gradient, just before its reduction."""

    def forward(self, loss, params) -> None:
        """Forward is done: ``loss``'s graph is alive beside ``params``."""

    def moment(self) -> None:
        """What the strategy holds may just have changed."""

    def report(self, metrics: dict) -> dict:
        """What this probe adds to the step's ``metrics``."""
        return {}


class Probes(Probe):
    """The probes attached to one strategy, each moment heard by all in the order attached."""

    def __init__(self, moments: frozenset):
        self.named, self.attached = moments, []

    def add(self, probe: Probe, strategy) -> Probe:
        missing = sorted(set(probe.needs) - self.named)
        if missing:
            raise ValueError(f"{type(probe).__name__} hears {', '.join(missing)}, which "
                             f"{type(strategy).__name__} does not name (it names "
                             f"{', '.join(sorted(self.named)) or 'no moment'})")
        probe.bind(strategy)
        self.attached.append(probe)
        return probe

    @property
    def shards(self) -> int:
        return max((p.shards for p in self.attached), default=1)

    def shard(self, rows: int, units) -> None:
        for probe in self.attached:
            probe.shard(rows, units)

    def gradient(self, grad) -> None:
        for probe in self.attached:
            probe.gradient(grad)

    def forward(self, loss, params) -> None:
        for probe in self.attached:
            probe.forward(loss, params)

    def moment(self) -> None:
        for probe in self.attached:
            probe.moment()

    def report(self, metrics: dict) -> dict:
        added = {}
        for probe in self.attached:
            added.update(probe.report(metrics))
        return added

    def after(self, hook):
        """``hook``, followed by :meth:`moment`: where a strategy's holdings change inside a
        hook it hands to others (a collective's start, a module's forward hook)."""
        def heard(*args):
            out = hook(*args)
            self.moment()
            return out

        return heard
