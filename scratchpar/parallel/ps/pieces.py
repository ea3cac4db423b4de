"""A parameter server's checkpoint pieces: each server writes and reads its own key range, of
the parameters and of the optimizer's state, as ranges of the one-device arrays the range
cuts (Li et al. 2014, ps-lite §3.1: a server owns its keys); a worker writes nothing and reads
the whole parameters, which it holds anyway. No rank gathers the optimizer's state."""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module, to_device
from ..pieces import Block, Piece


def _ranges(ps) -> list[tuple[int, Block, int, int]]:
    """This server's range as ranges of whole arrays: per parameter it touches, its index,
    its block (elements ``[start, stop)`` raveled) and where they lie in the range."""
    return [(i, Block.flat(ps.params[i].shape, start, stop), at, at + stop - start)
            for i, start, stop, at in ps.ranges.pieces[ps.comm.rank]]


def server_pieces(ps) -> tuple[list[Piece], dict]:
    """A server's range of the parameters (its fp32 master) under the model's names, and of
    each optimizer buffer under ``"<buffer>.<index>"``; the counters, step and rate, and the
    strategy's extras, as scalars. A worker's: none."""
    if not ps.is_server:
        return [], {}
    names = [name for name, _ in ps.model.named_parameters()]
    state = ps.optimizer.entries()  # the live arrays: a save copies nothing
    optim = {"step_count": state["step_count"], "lr": state["lr"]}
    pieces = []
    for i, block, lo, hi in _ranges(ps):
        pieces.append(Piece("model", names[i], block, ps.flat.data[lo:hi]))
        pieces += [Piece("optim", f"{b}.{i}", block, state[f"{b}.0"][lo:hi])
                   for b in ps.optimizer.buffers if f"{b}.0" in state]
    for c in ps.optimizer.counters:
        if f"{c}.0" in state:
            optim.update({f"{c}.{i}": state[f"{c}.0"] for i in range(len(names))})
    return pieces, {"model": {}, "optim": optim, **ps.extras()}


def load_server_pieces(ps, stored) -> None:
    """A server's range, or a worker's whole parameters, from a checkpoint's blocks (any
    strategy or number of servers wrote it)."""
    names = [name for name, _ in ps.model.named_parameters()]
    missing = [name for name in names if name not in stored.names("model")]
    if missing:
        raise ValueError(f"the checkpoint has no {', '.join(missing)}")
    if not ps.is_server:
        for name, p in zip(names, ps.params):
            whole = to_device(stored.read("model", name), dtype=p.dtype)
            get_array_module(p.data).copyto(p.data, whole)
        return
    parts, held = _ranges(ps), set(stored.names("optim"))
    flat = np.empty_like(ps.flat.data)  # (K_s,)
    for i, block, lo, hi in parts:
        flat[lo:hi] = stored.read("model", names[i], block).reshape(-1)
    scalars = stored.scalars("optim")
    mine = {k: scalars[k] for k in ("step_count", "lr") if k in scalars}
    for b in ps.optimizer.buffers:
        if held_for_all(b, [f"{b}.{i}" in held for i in range(len(names))]):
            mine[f"{b}.0"] = buffer = np.empty_like(flat)
            for i, block, lo, hi in parts:
                buffer[lo:hi] = stored.read("optim", f"{b}.{i}", block).reshape(-1)
    for c in ps.optimizer.counters:
        if held_for_all(c, [f"{c}.{i}" in scalars for i in range(len(names))]):
            mine[f"{c}.0"] = scalars[f"{c}.0"]
    ps.optimizer.load_state_dict(mine)
    np.copyto(ps.flat.data, flat)


def held_for_all(name: str, have: list[bool]) -> bool:
    """Whether a checkpoint holds optimizer state ``name`` for every parameter (``have``, one
    each); refused where it holds it for some only, since a server's range may span them all."""
    if any(have) and not all(have):
        raise ValueError(f"the checkpoint holds optimizer state {name!r} for some parameters "
                         "only; a server's range needs it for all")
    return all(have)
