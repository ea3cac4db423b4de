"""Where Hogwild's parameter vector θ lives: a node's shared memory, or one owner's window.

Both hold θ flat on the host, one slice per parameter, and offer the same few operations on a
parameter's rows (an int array of distinct row ids, or ``slice(None)`` for all of them):
``read`` them, ``subtract`` γ g from them, and, between barriers, copy θ out or in whole.
"""

from __future__ import annotations

import math

import numpy as np

from ...comm.flat import Layout
from ...comm.window import RemoteArray, SharedArray


class SharedStore:
    """θ in one :class:`~scratchpar.comm.window.SharedArray` that every rank of the node maps:
    a read is a load, a write a load-subtract-store, both plain NumPy on the same memory. Two
    ranks writing one coordinate at once may lose one of the two updates."""

    def __init__(self, comm, shapes, dtype):
        self.comm, layout = comm, Layout(shapes, dtype)
        self.shared = SharedArray(comm, layout.n, dtype)  # θ, (K,)
        self.views = layout.views(self.shared.array)

    def read(self, k: int, rows) -> np.ndarray:
        return self.views[k][rows].copy()

    def subtract(self, k: int, rows, values: np.ndarray) -> None:
        self.views[k][rows] -= values  # θ_v ← θ_v − γ g_v (Niu et al. 2011, Algorithm 1)

    def exclusive(self):
        """One writer at a time: the window's exclusive lock."""
        return self.shared.exclusive()

    def settle(self) -> None:
        """Collective: every rank's writes are done and visible to every rank."""
        self.shared.settle()

    def values(self) -> list[np.ndarray]:
        """A copy of θ, one array per parameter (settle first for a consistent one)."""
        return [view.copy() for view in self.views]

    def assign(self, arrays) -> None:
        """θ ← ``arrays`` (rank 0 calls it; settle after)."""
        for view, a in zip(self.views, arrays):
            view[...] = a

    def free(self) -> None:
        self.shared.free()


class RemoteStore:
    """θ in one :class:`~scratchpar.comm.window.RemoteArray` on rank 0, which works on
    nodes that share no memory: a read is an ``MPI_Get`` of the rows' elements, a write an
    ``MPI_Accumulate`` of −γ g, elementwise atomic, so no update is ever lost. A read may still
    see some of another worker's write and not the rest."""

    def __init__(self, comm, shapes, dtype):
        self.comm, self.layout = comm, Layout(shapes, dtype)
        self.remote = RemoteArray(comm, self.layout.n, dtype, owner=0)  # θ, (K,), on rank 0

    def _indices(self, k: int, rows):
        """The flat positions of parameter k's ``rows`` in θ: a slice, or an int array (n·C,)."""
        start, shape = self.layout.offsets[k], self.layout.shapes[k]
        if isinstance(rows, slice):
            return slice(start, start + self.layout.sizes[k])
        width = math.prod(shape[1:])  # C, the elements of one row
        return (start + rows[:, None] * width + np.arange(width)).reshape(-1)

    def read(self, k: int, rows) -> np.ndarray:
        flat = self.remote.read(self._indices(k, rows))
        shape = self.layout.shapes[k]
        return flat.reshape(shape if isinstance(rows, slice) else (len(rows), *shape[1:]))

    def subtract(self, k: int, rows, values: np.ndarray) -> None:
        self.remote.add(self._indices(k, rows), -values)  # θ_v ← θ_v − γ g_v, atomically

    def settle(self) -> None:
        self.remote.settle()

    def values(self) -> list[np.ndarray]:
        return [self.read(k, slice(None)) for k in range(len(self.layout.shapes))]

    def assign(self, arrays) -> None:
        """θ ← ``arrays``: a store into rank 0's own memory (rank 0 calls it; settle after)."""
        self.layout.pack(arrays, self.remote.local)

    def free(self) -> None:
        self.remote.free()


STORES = {"shared": SharedStore, "one-sided": RemoteStore}
