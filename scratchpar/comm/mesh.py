"""The process mesh: ranks laid out as a pp × dp × cp × tp grid, one sub-communicator per axis."""

from __future__ import annotations

import itertools
import numbers
from typing import NamedTuple

import numpy as np

from scratchpar.comm.errors import CommError

MAX_FITS_SHOWN = 12  # an error message lists at most this many meshes that would fit


class Axes(NamedTuple):
    """One number per axis, in the layout's order: pp varies slowest, tp fastest."""

    pp: int
    dp: int
    cp: int
    tp: int


AXES = Axes._fields  # ("pp", "dp", "cp", "tp")


class MeshError(CommError):
    """A mesh that cannot be laid out on the world; raised on every rank before any message."""


class Mesh:
    """The world's ranks as ``arange(size).reshape(pp, dp, cp, tp)``.

    Megatron-LM's order (Shoeybi et al. 2019; Narayanan et al. 2021, §3; its default
    tp-cp-ep-dp-pp): the axes that talk most are adjacent, so on one node. Tensor-parallel
    ranks vary fastest, then context-parallel ones, then data-parallel replicas, then pipeline
    stages (Llama 3 put dp outermost instead, [TP, CP, PP, DP], Dubey et al. 2024, §3.3.2).
    ``pp_comm``, ``dp_comm``, ``cp_comm`` and ``tp_comm`` hold the ranks that differ from this
    one only along that axis; a rank's rank in each is its coordinate on it.
    ``replica_comm`` holds the ranks that differ only along dp and cp: those that hold the same
    parameters and sum their gradients (Megatron-LM's data-parallel group with context
    parallelism). ``dp`` left out is the ranks the other axes leave: ``Mesh(comm)`` is pure data
    parallelism.

    ``ep`` folds onto the replicas (Megatron-LM's "parallel folding", Liu et al. 2025): a
    sparse layer's experts are split over ``ep_comm``, ep consecutive ranks of ``replica_comm``
    (in its dp-then-cp order, so cp neighbours first), which trade tokens; ``edp_comm`` holds the
    replica ranks with the same experts (DeepSpeed's expert-data-parallel group), which sum the
    experts' gradients. ep divides dp·cp and adds no rank: at ep = dp·cp every replica rank
    holds its own experts, and ``edp_comm`` is one rank.
    """

    def __init__(self, comm, dp: int | None = None, pp: int = 1, tp: int = 1, cp: int = 1,
                 ep: int = 1):
        if dp is None:
            others = (pp, tp, cp)
            dp = (max(comm.size // int(np.prod(others)), 1)
                  if all(_positive_int(n) for n in others) else 1)
        check(comm.size, dp, pp, tp, cp)  # before any message: every rank raises alike
        check_experts(dp, cp, ep)
        self.world = comm
        self.shape = Axes(int(pp), int(dp), int(cp), int(tp))
        self.pp, self.dp, self.cp, self.tp = self.shape
        self.layout = layout(self.shape)  # (pp, dp, cp, tp) world ranks
        self.coords = coords(comm.rank, self.shape)  # this rank's (p, d, c, t)
        subs = []
        for axis, name in enumerate(AXES):  # every rank splits for every axis, in this order
            color, key = color_key(comm.rank, (axis,), self.shape)
            subs.append(comm.split(color, key, name=f"{comm.name}/{name}{self.ranks(name)}"))
        self.pp_comm, self.dp_comm, self.cp_comm, self.tp_comm = subs
        self.replica_comm = self.dp_comm
        if self.cp > 1:
            color, key = color_key(comm.rank, REPLICAS, self.shape)
            self.replica_comm = comm.split(color, key, name=f"{comm.name}/dp×cp")
        self.ep = int(ep)
        self.ep_comm = self.edp_comm = None
        if self.ep > 1:
            q = self.replica_comm.rank  # d·cp + c
            self.ep_comm = self.replica_comm.split(q // self.ep, q % self.ep,
                                                   name=f"{comm.name}/ep")
            self.edp_comm = self.replica_comm.split(q % self.ep, q // self.ep,
                                                    name=f"{comm.name}/edp")

    def free(self) -> None:
        """Collective: free the axis communicators."""
        for sub in (self.pp_comm, self.dp_comm, self.cp_comm, self.tp_comm):
            sub.free()
        if self.replica_comm is not self.dp_comm:
            self.replica_comm.free()
        if self.ep_comm is not None:
            self.ep_comm.free()
            self.edp_comm.free()

    def comm(self, axis: str):
        """The sub-communicator along ``axis`` (``"pp"``, ``"dp"``, ``"cp"`` or ``"tp"``)."""
        return (self.pp_comm, self.dp_comm, self.cp_comm, self.tp_comm)[_axis(axis)]

    def ranks(self, axis: str) -> list[int]:
        """World ranks of this rank's group along ``axis``, in the group's rank order."""
        return group(self.world.rank, _axis(axis), self.shape)

    def __repr__(self) -> str:
        ep = f", ep={self.ep}" if self.ep > 1 else ""
        return f"Mesh({_sizes(self.shape)}{ep}) on {self.world!r}"

    def __str__(self) -> str:
        return draw(self.shape, self.world.rank)


REPLICAS = (AXES.index("dp"), AXES.index("cp"))  # the axes whose ranks hold the same parameters


def check(size: int, dp, pp, tp, cp=1) -> None:
    """Raise :class:`MeshError` listing every reason the axes cannot cover ``size`` ranks."""
    given = {"dp": dp, "pp": pp, "tp": tp, "cp": cp}
    problems = [f"{name} must be a positive integer, got {value!r}"
                for name, value in given.items() if not _positive_int(value)]
    named = {k: v for k, v in given.items() if k != "cp" or v != 1}
    if not problems and int(np.prod(list(named.values()))) != size:
        fits = ["×".join(map(str, f)) for f in factorizations(size, len(named))]
        shown = ", ".join(fits[:MAX_FITS_SHOWN]) + (", …" if len(fits) > MAX_FITS_SHOWN else "")
        product = int(np.prod(list(named.values())))
        problems.append(f"it needs {'·'.join(named)} = {'·'.join(map(str, named.values()))} = "
                        f"{_ranks(product)}, the world has {size} (meshes that fit: "
                        f"{'×'.join(named)} = {shown})")
    if problems:
        bullets = "".join(f"\n  - {p}" for p in problems)
        asked = ", ".join(f"{k}={v!r}" for k, v in given.items() if k != "cp" or v != 1)
        raise MeshError(f"Mesh({asked}) cannot be laid out on a world of {_ranks(size)}:"
                        f"{bullets}")


def check_experts(dp, cp, ep) -> None:
    """Raise :class:`MeshError` unless ``ep`` (a positive integer) divides dp·cp, the replica
    ranks it folds onto."""
    if not _positive_int(ep):
        raise MeshError(f"ep must be a positive integer, got {ep!r}")
    if (dp * cp) % ep:
        fits = [d for d in range(1, dp * cp + 1) if (dp * cp) % d == 0]
        raise MeshError(f"ep={ep} splits a sparse layer's experts over replica ranks: it must "
                        f"divide dp·cp = {dp}·{cp} = {dp * cp} (ep that fit: "
                        f"{', '.join(map(str, fits))})")


def factorizations(size: int, axes: int = 3) -> list[tuple[int, ...]]:
    """Every tuple of ``axes`` positive integers whose product is ``size``, lexicographic."""
    if axes == 1:
        return [(size,)]
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    return [(d, *rest) for d in divisors for rest in factorizations(size // d, axes - 1)]


def layout(shape: Axes) -> np.ndarray:
    """World rank at each mesh position: ``layout[p, d, c, t]`` (tp fastest-varying)."""
    return np.arange(int(np.prod(shape))).reshape(shape)  # (pp, dp, cp, tp)


def coords(rank: int, shape: Axes) -> Axes:
    """The ``(p, d, c, t)`` position of ``rank``: ``rank = ((p·dp + d)·cp + c)·tp + t``."""
    return Axes(*(int(c) for c in np.unravel_index(rank, shape)))


def group(rank: int, axis: int, shape: Axes) -> list[int]:
    """World ranks that differ from ``rank`` only along ``axis``, ordered by that coordinate."""
    index = list(coords(rank, shape))
    index[axis] = slice(None)
    return [int(r) for r in layout(shape)[tuple(index)]]


def color_key(rank: int, axes: tuple[int, ...], shape: Axes) -> tuple[int, int]:
    """The ``split`` arguments for the group that differs only along ``axes``: its number (the
    other coordinates, flattened) and the rank's place in it (its coordinates on ``axes``,
    flattened in the layout's order)."""
    position = coords(rank, shape)
    others = [a for a in range(len(AXES)) if a not in axes]
    color = np.ravel_multi_index([position[a] for a in others], [shape[a] for a in others])
    key = np.ravel_multi_index([position[a] for a in axes], [shape[a] for a in axes])
    return int(color), int(key)


def draw(shape: Axes, rank: int | None = None) -> str:
    """The grid as text: a row per (pp, dp, cp), a column per tp, ``rank`` in brackets (cp
    named only where it splits)."""
    grid, rows = layout(shape), [a for a in AXES[:-1] if a != "cp" or shape.cp > 1]
    width = max(len(str(grid.size - 1)) + 2, len(f"tp={shape.tp - 1}"))
    label = " ".join(f"{a}={getattr(shape, a) - 1}" for a in rows)
    order = ", then ".join(a for a in reversed(AXES[:-1]) if a in rows)
    lines = [f"Mesh {_sizes(shape, ' × ')} over {_ranks(grid.size)} "
             f"(tp neighbours adjacent, then {order})",
             " " * len(label) + "".join(f"{f'tp={t}':>{width + 1}}" for t in range(shape.tp))]
    for place in itertools.product(*(range(n) for n in shape[:-1])):
        at = Axes(*place, 0)
        head = " ".join(f"{a}={getattr(at, a)}" for a in rows)
        cells = "".join(f"{f'[{r}]' if r == rank else str(r):>{width + 1}}" for r in grid[place])
        lines.append(f"{head:<{len(label)}}{cells}")
    if rank is not None:
        at = coords(rank, shape)
        named = ", ".join(f"{a}={getattr(at, a)}" for a in ("dp", "pp", "cp", "tp")
                          if a != "cp" or shape.cp > 1)
        lines.append(f"this rank: [{rank}] at ({named})")
    return "\n".join(lines)


def _sizes(shape: Axes, join: str = ", ") -> str:
    """``dp=…, pp=…, tp=…`` (and ``cp=…`` where it splits), in the constructor's order."""
    return join.join(f"{a}={getattr(shape, a)}" for a in ("dp", "pp", "cp", "tp")
                     if a != "cp" or shape.cp > 1)


def _positive_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > 0


def _ranks(n: int) -> str:
    return f"{n} rank" if n == 1 else f"{n} ranks"


def _axis(axis: str) -> int:
    if axis not in AXES:
        raise MeshError(f"axis must be one of {AXES}, got {axis!r}")
    return AXES.index(axis)
