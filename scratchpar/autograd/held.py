"""What a rank holds, counted from its arrays: the buffers an autograd graph keeps for backward."""

from __future__ import annotations

from ..backend import get_array_module
from .tensor import Tensor


def buffer(a):
    """The array that owns ``a``'s memory (``a`` itself unless it is a view)."""
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def graph_bytes(out: Tensor, params) -> int:
    """Bytes of the distinct buffers that ``out``'s autograd graph keeps alive for backward:
    the data of every tensor on it and every array an op saved on its context, parameters'
    buffers excepted (they are counted as parameters) and each buffer once (views share it:
    two owning buffers overlap only if they are the same, which ``may_share_memory`` sees)."""
    xp = get_array_module(out.data)
    held = [buffer(p.data) for p in params]
    counted, seen, todo = 0, set(), [out]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        arrays = [t.data]
        if t._ctx is not None:
            arrays += [v for v in vars(t._ctx).values() if hasattr(v, "nbytes")]
            todo += [p for p in t._ctx.parents if isinstance(p, Tensor)]
        for a in map(buffer, arrays):
            if a.nbytes and not any(xp.may_share_memory(a, b) for b in held):
                held.append(a)
                counted += a.nbytes
    return int(counted)
