"""Scratch buffers that collectives and staged messages borrow and return: a call allocates nothing.

A fresh scratch array per call costs more than it looks: a large one comes straight from the
kernel (mmap) and page-faults on first touch, every call. MPICH's large all-reduce pays this
(it allocates temporaries on each call). Reusing buffers is part of why the ring here beats it
(docs/collectives.md, "Measured"). Pinned host memory, which staging copies device buffers
through (staging.py), costs far more to allocate (the pages are locked, and on a GPU mapped for
the copy engines), so every pinned buffer is pooled, whatever its size.
"""

from __future__ import annotations

import numpy as np

from scratchpar import backend

POOLED_BYTES = 64 * 1024  # smaller buffers come from malloc's free lists: cheap, not pooled
PINNED_MIN_BYTES = 4096  # pinned buffers come in powers of two from here: few sizes, reused often
MAX_SETTLING = 4  # a receive finding this many buffers settling syncs rather than allocate more


class Workspace:
    """Flat buffers per (array module, dtype), and pinned host byte buffers shared by all dtypes.

    Each collective or message in flight holds its own buffers until it completes. A pinned buffer
    given back while a host-to-device copy queued on the stream may still read it is *settling*:
    a send may stage through it (its device-to-host copy is queued behind, on the same stream),
    but a receive, which MPI writes outside the stream's order, may not until the stream has been
    synchronized (:meth:`settle`; every staged send does it). A receive that finds no settled
    buffer gets a new one, so the pool grows to the pattern of messages and then stops. Only
    when many buffers are settling does it synchronize instead (a rank that only receives).
    """

    def __init__(self):
        self._free: dict[tuple, list] = {}
        self._pinned: list[np.ndarray] = []  # whole pinned buffers free for any use
        self._settling: list[np.ndarray] = []  # free once the stream passes its queued copies

    def take(self, like, n: int):
        """A flat array of ``n`` elements with ``like``'s dtype and module (contents undefined)."""
        xp = backend.get_array_module(like)
        if n * like.itemsize < POOLED_BYTES:
            return xp.empty(n, like.dtype)
        free = self._free.setdefault((xp, like.dtype), [])
        fits = [i for i, b in enumerate(free) if b.size >= n]
        if not fits:
            return xp.empty(n, like.dtype)
        best = min(fits, key=lambda i: free[i].size)  # the smallest that fits
        return free.pop(best)[:n]

    def give(self, buf) -> None:
        """Return a buffer from :meth:`take` for later calls."""
        whole = buf if buf.base is None else buf.base
        if whole.nbytes >= POOLED_BYTES:
            self._free.setdefault((backend.get_array_module(whole), whole.dtype), []).append(whole)

    def take_pinned(self, shape, dtype, settled: bool = False):
        """``(host, whole)``: a pinned host array of ``shape`` and ``dtype`` (contents undefined),
        and the buffer it lies in, to :meth:`give_pinned` back once the message is done with it.
        ``settled``: no copy queued on the stream may still read it (MPI is to write it)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        whole = self._pop(nbytes, settled)
        if whole is None and settled and len(self._settling) >= MAX_SETTLING:
            backend.sync()
            self.settle()
            whole = self._pop(nbytes, settled)
        if whole is None:
            capacity = max(PINNED_MIN_BYTES, 1 << max(nbytes - 1, 0).bit_length())
            whole = backend.empty_pinned(capacity, np.uint8)
        return whole[:nbytes].view(dtype).reshape(shape), whole

    def give_pinned(self, whole, settling: bool = False) -> None:
        """Return a buffer from :meth:`take_pinned`; ``settling`` if a copy queued on the stream
        still reads it."""
        (self._settling if settling else self._pinned).append(whole)

    def settle(self) -> None:
        """The stream has been synchronized: no queued copy reads a pinned buffer any more."""
        self._pinned += self._settling
        self._settling = []

    def _pop(self, nbytes: int, settled: bool):
        """The smallest free pinned buffer of at least ``nbytes`` (settling ones too unless
        ``settled``), taken out of the pool; ``None`` if none fits."""
        best = None
        for pool in (self._pinned,) if settled else (self._pinned, self._settling):
            for i, b in enumerate(pool):
                if b.nbytes >= nbytes and (best is None or b.nbytes < best[0][best[1]].nbytes):
                    best = pool, i
        return None if best is None else best[0].pop(best[1])
