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
    ``out``'s data, every array an op saved on its context (alone or in a tuple) and every
    leaf's data, parameters' buffers excepted (they are counted as parameters) and each
    buffer once (views share it: two owning buffers overlap only if they are the same, which
    ``may_share_memory`` sees).
    An op's output is not among them unless an op saved it (``Context``)."""
    xp = get_array_module(out.data)
    held = [buffer(p.data) for p in params]
    counted, seen, todo = 0, set(), [out._ctx]
    arrays = [out.data]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Tensor):  # a leaf
            arrays.append(node.data)
            continue
        for value in vars(node).values():  # an array, or a tuple of them (recomputation's inputs)
            arrays += [v for v in (value if type(value) is tuple else (value,))
                       if hasattr(v, "nbytes")]
        todo += node.parents
    for a in map(buffer, arrays):
        if a.nbytes and not any(xp.may_share_memory(a, b) for b in held):
            held.append(a)
            counted += a.nbytes
    return int(counted)
