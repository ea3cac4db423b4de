"""The locked spec beside Hogwild: one writer at a time, so no update is ever lost."""

from __future__ import annotations

from ..description import Description
from .strategy import Hogwild


class LockedHogwild(Hogwild):
    """Hogwild whose write (load, subtract, store of the rows) happens under the shared
    window's exclusive lock, one writer at a time: no update is ever lost, at the price of
    serialized writes. The read for the gradient stays outside it, so a gradient may still be
    taken at rows another worker has since moved: the lock removes lost updates, not
    staleness. Niu et al. 2011's AIG locks finer: only a term's variables, around line 4 of
    Algorithm 1. θ lives in the shared window (one node), the one with a lock."""

    def __init__(self, model, make_optimizer, objective, mesh, /, *, grad_clip: float = 0.0):
        super().__init__(model, make_optimizer, objective, mesh, window="shared",
                         grad_clip=grad_clip)

    @classmethod
    def describe(cls, shape, world: int) -> Description:
        """Hogwild's in the shared window."""
        return super().describe(shape, world, window="shared")

    def _write(self, rows: list, steps: list) -> None:
        with self.store.exclusive():
            super()._write(rows, steps)
