"""Python operators and methods on Tensor (``a + b``, ``a @ b``, ``a[i]``, ``a.sum()``…)."""

from __future__ import annotations

from . import functional as F
from .tensor import Tensor


def _reflected(fn):
    return lambda self, other: fn(other, self)


def install() -> None:
    """Attach the functional API to Tensor as operators and methods."""
    ops = {
        "__add__": F.add, "__radd__": _reflected(F.add),
        "__sub__": F.sub, "__rsub__": _reflected(F.sub),
        "__mul__": F.mul, "__rmul__": _reflected(F.mul),
        "__truediv__": F.div, "__rtruediv__": _reflected(F.div),
        "__pow__": F.pow, "__rpow__": _reflected(F.pow),
        "__matmul__": F.matmul, "__rmatmul__": _reflected(F.matmul),
        "__neg__": F.neg, "__getitem__": F.getitem,
        "sum": F.sum, "mean": F.mean, "max": F.max,
        "exp": F.exp, "log": F.log, "tanh": F.tanh, "sigmoid": F.sigmoid, "relu": F.relu,
        "gelu": F.gelu, "reshape": F.reshape, "permute": F.permute, "transpose": F.transpose,
        "softmax": F.softmax, "log_softmax": F.log_softmax,
    }
    for name, fn in ops.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(F.transpose)
