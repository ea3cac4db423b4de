"""Scratch buffers that collectives borrow and return, so a call allocates nothing.

A fresh scratch array per call costs more than it looks: a large one comes straight from the
kernel (mmap) and page-faults on first touch, every call. MPICH's large all-reduce pays this
(it allocates temporaries on each call); reusing buffers is part of why the ring here beats it
(docs/collectives.md, "Measured").
"""

from __future__ import annotations

from scratchpar.backend import get_array_module

POOLED_BYTES = 64 * 1024  # smaller buffers come from malloc's free lists: cheap, not pooled


class Workspace:
    """Flat buffers per (array module, dtype); each collective in flight holds its own."""

    def __init__(self):
        self._free: dict[tuple, list] = {}

    def take(self, like, n: int):
        """A flat array of ``n`` elements with ``like``'s dtype and module (contents undefined)."""
        xp = get_array_module(like)
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
            self._free.setdefault((get_array_module(whole), whole.dtype), []).append(whole)
