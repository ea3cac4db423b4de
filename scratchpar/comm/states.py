"""Flat state dicts (arrays and scalars) from every rank onto rank 0, arrays as buffers."""

from __future__ import annotations


def gather_states(comm, state: dict, xp, what: str = "state gather") -> list[dict] | None:
    """Every rank's flat ``state`` on rank 0, in rank order; ``None`` on the other ranks.

    Names, shapes, dtypes and scalars are pickled metadata; the arrays travel as buffers
    (DESIGN.md §2: arrays are never pickled). ``what`` names the exchange in errors.
    """
    arrays = {k: v for k, v in state.items() if hasattr(v, "shape")}
    scalars = {k: v for k, v in state.items() if k not in arrays}
    layout = {k: (v.shape, _spelled(v.dtype)) for k, v in arrays.items()}
    everyone = comm.allgather_obj((layout, scalars), what)
    if comm.rank != 0:
        for v in arrays.values():
            comm.send(xp.ascontiguousarray(v), 0)
        return None
    states = [state]
    for r, (layout, scalars) in enumerate(everyone[1:], start=1):
        received = {k: xp.empty(shape, dtype) for k, (shape, dtype) in layout.items()}
        for buf in received.values():
            comm.recv(buf, r)
        states.append({**received, **scalars})
    return states


def _spelled(dtype) -> str:
    """A dtype as text another rank reads back: its array-protocol string, but bfloat16's name
    (its string, "<V2", reads back as two raw bytes)."""
    return dtype.name if dtype.name == "bfloat16" else dtype.str
