"""Hogwild that counts its colliding writes, for the asynchronous benchmark."""

from __future__ import annotations

import numpy as np

from ...comm.window import SharedArray
from ...parallel import Hogwild


class CountingHogwild(Hogwild):
    """Lock-free Hogwild (Niu et al. 2011, Algorithm 1) with a second shared window beside θ:
    ``written[w, r]``, how many writes worker w has finished to row r (a row: an index of a
    parameter's first axis, the unit a sparse model's ``touched`` names; a 1-D dense parameter
    is one row per element). Only worker w adds to its own line, after its write, so the counts
    are exact without a lock.

    At its read of θ a worker notes, for each row it touches, the others' writes so far; just
    before its write it looks again. A row *collides* if the others' count grew in between:
    another worker's write to that row landed after this worker read it and before this one
    writes it, so this update was computed on values already overwritten (and, unlocked, the two
    read–modify–writes may interleave and lose one). ``counts`` holds, per parameter, the writes,
    the coordinates written and those in colliding rows; ``colliding`` the writes with at least
    one colliding row."""

    def __init__(self, model, optimizer, loss_fn, count_fn, comm):
        super().__init__(model, optimizer, loss_fn, count_fn, comm, lock=False)
        self.row_counts = [p.shape[0] if p.ndim else 1 for p in self.params]
        self.row_sizes = [p.size // n for p, n in zip(self.params, self.row_counts)]
        self.starts = np.cumsum([0, *self.row_counts[:-1]])  # each parameter's first row
        self.written = SharedArray(comm, (comm.size, sum(self.row_counts)), np.int64)  # (P, R)
        self.others = np.arange(comm.size) != comm.rank  # (P,) the other workers' lines
        self.lines: list[np.ndarray] = []  # this step's rows of ``written``, per parameter
        self.seen: list[np.ndarray] = []  # the others' writes to them at the read
        self.counts = {name: {"coordinates": 0, "colliding": 0} for name in self.names}
        self.writes = self.colliding = 0

    def _line(self, i: int, host_rows) -> np.ndarray:
        """Parameter i's rows ``host_rows`` (indices or ``slice(None)``) as rows of ``written``."""
        start = self.starts[i]
        if isinstance(host_rows, slice):
            return np.arange(start, start + self.row_counts[i])  # (n,)
        return start + np.asarray(host_rows).reshape(-1)  # (n,)

    def _others(self, lines: list[np.ndarray]) -> list[np.ndarray]:
        return [self.written.array[self.others][:, line].sum(axis=0) for line in lines]  # (n,)

    def _rows(self, batch) -> list[tuple]:
        rows = super()._rows(batch)  # called just before the read of θ's rows
        self.lines = [self._line(i, theirs) for i, (_, theirs) in enumerate(rows)]
        self.seen = self._others(self.lines)
        return rows

    def _write(self, rows: list, steps: list) -> None:
        now = self._others(self.lines)
        hit = False
        for i, (name, before, after, s) in enumerate(zip(self.names, self.seen, now, steps)):
            if s is None:
                continue
            collided = after > before  # (n,) another worker wrote the row in between
            self.counts[name]["coordinates"] += len(collided) * self.row_sizes[i]
            self.counts[name]["colliding"] += int(collided.sum()) * self.row_sizes[i]
            hit |= bool(collided.any())
        self.writes += 1
        self.colliding += hit
        super()._write(rows, steps)
        for line, s in zip(self.lines, steps):
            if s is not None:
                self.written.array[self.comm.rank, line] += 1  # after the write: it has landed

    def close(self) -> None:
        self.written.free()
        super().close()
