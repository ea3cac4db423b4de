"""The autograd's own cost per op: forward + backward on tiny arrays, minus NumPy doing the same."""

from __future__ import annotations

import numpy as np

from ...autograd import Tensor
from ...autograd import functional as F
from ..timing import Timed, interleaved, on_host

SHAPE = (8, 8)


def _mul(a, b, g):
    return a * b, g * b, g * a


def _matmul(a, b, g):
    return a @ b, g @ b.T, a.T @ g


def _relu(a, b, g):
    mask = a > 0
    return a * mask, g * mask


# op name → (the autograd op on Tensors a, b; the bare NumPy forward and backward of that op)
OPS = {
    "add": (F.add, lambda a, b, g: a + b),
    "mul": (F.mul, _mul),
    "matmul": (F.matmul, _matmul),
    "relu": (lambda a, b: F.relu(a), _relu),
    "sum": (lambda a, b: F.sum(a), lambda a, b, g: (a.sum(), np.broadcast_to(g, a.shape))),
    "reshape": (lambda a, b: F.reshape(a, -1), lambda a, b, g: (a.reshape(-1), g.reshape(a.shape))),
}


def _one_op_graph(op, a, b, g_out):
    """Build the one-op graph and run its backward, from fresh leaves each time."""

    def run():
        a.grad = b.grad = None
        op(a, b).backward(g_out)

    return run


def _torch_graph(name: str, a, b, g_out):
    import torch

    ops = {"add": torch.add, "mul": torch.mul, "matmul": torch.matmul,
           "relu": lambda x, y: torch.relu(x), "sum": lambda x, y: x.sum(),
           "reshape": lambda x, y: x.reshape(-1)}
    ta, tb = (torch.from_numpy(v.copy()).requires_grad_() for v in (a, b))
    return _one_op_graph(ops[name], ta, tb, torch.from_numpy(np.asarray(g_out)))


def repeated(fn, calls: int):
    """``fn`` called ``calls`` times in a row: one timed turn for a tiny operation."""

    def run():
        for _ in range(calls):
            fn()

    return run


def overhead_rows(calls: int, repeats: int, with_torch: bool) -> list[dict]:
    """Per op: µs per forward+backward for NumPy, scratchpar and (optionally) PyTorch, on host
    arrays whatever the ``--device``: the Python cost of a graph node, which no device changes
    (a GPU adds its own kernel-launch latency, CuPy's, not scratchpar's)."""
    gen = np.random.default_rng(0)
    a, b = (gen.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
    rows = []
    for name, (op, bare) in OPS.items():
        ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
        g_out = np.ones_like(op(ta, tb).data)
        runners = {"numpy": lambda bare=bare, g=g_out: bare(a, b, g),
                   "scratchpar": _one_op_graph(op, ta, tb, g_out)}
        if with_torch:
            runners["torch"] = _torch_graph(name, a, b, g_out)
        samples = interleaved({k: Timed(repeated(fn, calls), on_host)
                               for k, fn in runners.items()}, repeats, 1)
        us = {k: 1e3 * s.median_ms() / calls for k, s in samples.items()}
        rows.append({"op": name, "shape": SHAPE, "numpy_us": us["numpy"],
                     "scratchpar_us": us["scratchpar"],
                     "overhead_us": us["scratchpar"] - us["numpy"],
                     "torch_overhead_us": us["torch"] - us["numpy"] if with_torch else None})
    return rows
