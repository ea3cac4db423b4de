"""The process mesh: ranks laid out as a dp × pp × tp grid, one sub-communicator per axis."""

from __future__ import annotations

import itertools
import numbers

import numpy as np

from scratchpar.comm.errors import CommError

AXES = ("dp", "pp", "tp")
MAX_FITS_SHOWN = 12  # an error message lists at most this many meshes that would fit


class MeshError(CommError):
    """A mesh that cannot be laid out on the world; raised on every rank before any message."""


class Mesh:
    """The world's ranks as ``arange(size).reshape(dp, pp, tp)`` (DESIGN.md §2).

    Megatron's order (Shoeybi et al. 2019; Narayanan et al. 2021, §3): tensor-parallel ranks are
    adjacent (the fastest-varying axis, so on one node), then pipeline stages, then data-parallel
    replicas. ``dp_comm``, ``pp_comm`` and ``tp_comm`` hold the ranks that differ from this one
    only along that axis. A rank's rank in each is its coordinate on that axis. ``dp`` left out
    is the ranks the other axes leave: ``Mesh(comm)`` is pure data parallelism.
    """

    def __init__(self, comm, dp: int | None = None, pp: int = 1, tp: int = 1):
        if dp is None:
            dp = max(comm.size // (pp * tp), 1) if _positive_int(pp) and _positive_int(tp) else 1
        check(comm.size, dp, pp, tp)  # before any message: every rank raises alike
        self.world = comm
        self.shape = (int(dp), int(pp), int(tp))
        self.dp, self.pp, self.tp = self.shape
        self.layout = layout(self.shape)  # (dp, pp, tp) world ranks
        self.coords = coords(comm.rank, self.shape)  # (d, p, t) of this rank
        subs = []
        for axis, name in enumerate(AXES):  # every rank splits for every axis, in this order
            color, key = color_key(comm.rank, axis, self.shape)
            group_ranks = group(comm.rank, axis, self.shape)
            subs.append(comm.split(color, key, name=f"{comm.name}/{name}{group_ranks}"))
        self.dp_comm, self.pp_comm, self.tp_comm = subs

    def free(self) -> None:
        """Collective: free the three axis communicators."""
        for sub in (self.dp_comm, self.pp_comm, self.tp_comm):
            sub.free()

    def comm(self, axis: str):
        """The sub-communicator along ``axis`` (``"dp"``, ``"pp"`` or ``"tp"``)."""
        return (self.dp_comm, self.pp_comm, self.tp_comm)[_axis(axis)]

    def ranks(self, axis: str) -> list[int]:
        """World ranks of this rank's group along ``axis``, in the group's rank order."""
        return group(self.world.rank, _axis(axis), self.shape)

    def __repr__(self) -> str:
        return f"Mesh(dp={self.dp}, pp={self.pp}, tp={self.tp}) on {self.world!r}"

    def __str__(self) -> str:
        return draw(self.shape, self.world.rank)


def check(size: int, dp, pp, tp) -> None:
    """Raise :class:`MeshError` listing every reason ``(dp, pp, tp)`` cannot cover ``size``."""
    problems = [f"{name} must be a positive integer, got {value!r}"
                for name, value in zip(AXES, (dp, pp, tp)) if not _positive_int(value)]
    if not problems and dp * pp * tp != size:
        fits = [f"{a}×{b}×{c}" for a, b, c in factorizations(size)]
        shown = ", ".join(fits[:MAX_FITS_SHOWN]) + (", …" if len(fits) > MAX_FITS_SHOWN else "")
        problems.append(f"it needs dp·pp·tp = {dp}·{pp}·{tp} = {_ranks(dp * pp * tp)}, the world "
                        f"has {size} (meshes that fit: dp×pp×tp = {shown})")
    if problems:
        bullets = "".join(f"\n  - {p}" for p in problems)
        raise MeshError(f"Mesh(dp={dp!r}, pp={pp!r}, tp={tp!r}) cannot be laid out on a world of "
                        f"{_ranks(size)}:{bullets}")


def factorizations(size: int) -> list[tuple[int, int, int]]:
    """Every ``(dp, pp, tp)`` with ``dp·pp·tp == size``, in lexicographic order."""
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    return [(a, b, size // (a * b)) for a, b in itertools.product(divisors, divisors)
            if size % (a * b) == 0]


def layout(shape: tuple[int, int, int]) -> np.ndarray:
    """World rank at each mesh position: ``layout[d, p, t]`` (tp fastest-varying)."""
    return np.arange(int(np.prod(shape))).reshape(shape)  # (dp, pp, tp)


def coords(rank: int, shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """The ``(d, p, t)`` position of ``rank``: ``rank = (d·pp + p)·tp + t``."""
    return tuple(int(c) for c in np.unravel_index(rank, shape))


def group(rank: int, axis: int, shape: tuple[int, int, int]) -> list[int]:
    """World ranks that differ from ``rank`` only along ``axis``, ordered by that coordinate."""
    index = list(coords(rank, shape))
    index[axis] = slice(None)
    return [int(r) for r in layout(shape)[tuple(index)]]


def color_key(rank: int, axis: int, shape: tuple[int, int, int]) -> tuple[int, int]:
    """The ``split`` arguments for ``axis``: the group's number (the other two coordinates,
    flattened) and the rank's place in it (its coordinate on ``axis``)."""
    position = coords(rank, shape)
    others = [c for a, c in enumerate(position) if a != axis]
    sizes = [s for a, s in enumerate(shape) if a != axis]
    return int(np.ravel_multi_index(others, sizes)), position[axis]


def draw(shape: tuple[int, int, int], rank: int | None = None) -> str:
    """The grid as text: a row per (dp, pp), a column per tp, ``rank`` in brackets."""
    dp, pp, tp = shape
    grid = layout(shape)
    width = max(len(str(grid.size - 1)) + 2, len(f"tp={tp - 1}"))
    left = len(f"dp={dp - 1} pp={pp - 1}")
    lines = [f"Mesh dp={dp} × pp={pp} × tp={tp} over {_ranks(grid.size)} "
             "(tp neighbours adjacent, then pp, then dp)",
             " " * left + "".join(f"{f'tp={t}':>{width + 1}}" for t in range(tp))]
    for d, p in itertools.product(range(dp), range(pp)):
        label = (f"dp={d} " if p == 0 else " " * len(f"dp={d} ")) + f"pp={p}"
        cells = "".join(f"{f'[{r}]' if r == rank else str(r):>{width + 1}}" for r in grid[d, p])
        lines.append(f"{label:<{left}}{cells}")
    if rank is not None:
        d, p, t = coords(rank, shape)
        lines.append(f"this rank: [{rank}] at (dp={d}, pp={p}, tp={t})")
    return "\n".join(lines)


def _positive_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > 0


def _ranks(n: int) -> str:
    return f"{n} rank" if n == 1 else f"{n} ranks"


def _axis(axis: str) -> int:
    if axis not in AXES:
        raise MeshError(f"axis must be one of {AXES}, got {axis!r}")
    return AXES.index(axis)
