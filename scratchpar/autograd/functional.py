"""The functional API: one plain function per op, on Tensors (or constants), returning a Tensor."""

from __future__ import annotations

import builtins

from .. import kernels
from . import ops_fused as fused
from . import ops_math as m
from . import ops_nn as nn
from . import ops_reduce as r
from . import ops_shape as s
from .precision import WIDE, is_low
from .tensor import Tensor


def _data(x):
    return x.data if isinstance(x, Tensor) else x


def add(a, b) -> Tensor:
    return m.Add.apply(a, b)


def sub(a, b) -> Tensor:
    return m.Sub.apply(a, b)


def mul(a, b) -> Tensor:
    return m.Mul.apply(a, b)


def div(a, b) -> Tensor:
    return m.Div.apply(a, b)


def neg(a) -> Tensor:
    return m.Neg.apply(a)


def pow(a, b) -> Tensor:  # noqa: A001 - the op's name
    return m.Pow.apply(a, b)


def matmul(a, b) -> Tensor:
    return m.MatMul.apply(a, b)


def astype(a, dtype) -> Tensor:
    return m.Cast.apply(a, dtype=dtype)


def wide(a) -> Tensor:
    """``a`` in fp32 if it is a 16-bit float, else ``a`` itself (no graph node): a loss
    computed from a 16-bit model's output, in fp32."""
    return astype(a, WIDE) if is_low(a.dtype) else a


def exp(a) -> Tensor:
    return m.Exp.apply(a)


def log(a) -> Tensor:
    return m.Log.apply(a)


def tanh(a) -> Tensor:
    return m.Tanh.apply(a)


def sigmoid(a) -> Tensor:
    return m.Sigmoid.apply(a)


def relu(a) -> Tensor:
    return m.ReLU.apply(a)


def gelu(a) -> Tensor:
    return (fused.GELU if kernels.fused(_data(a)) else m.GELU).apply(a)


def sum(a, axis=None, keepdims=False) -> Tensor:  # noqa: A001 - the op's name
    return r.Sum.apply(a, axis=axis, keepdims=keepdims)


def mean(a, axis=None, keepdims=False) -> Tensor:
    return r.Mean.apply(a, axis=axis, keepdims=keepdims)


def max(a, axis=None, keepdims=False) -> Tensor:  # noqa: A001 - the op's name
    return r.Max.apply(a, axis=axis, keepdims=keepdims)


def reshape(a, *shape) -> Tensor:
    return s.Reshape.apply(a, shape=shape[0] if len(shape) == 1 else shape)


def permute(a, *axes) -> Tensor:
    """Reorder axes: ``permute(x, 1, 0)`` or ``permute(x, (1, 0))``; no axes reverses them."""
    if not axes:
        return s.Permute.apply(a, axes=None)
    one_sequence = len(axes) == 1 and isinstance(axes[0], (tuple, list))  # permute((1, 0))
    return s.Permute.apply(a, axes=axes[0] if one_sequence else axes)


def transpose(a, axis1=-2, axis2=-1) -> Tensor:
    """Swap two axes (the last two by default)."""
    axes = list(range(a.ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return s.Permute.apply(a, axes=axes)


def getitem(a, index) -> Tensor:
    index = tuple(map(_data, index)) if isinstance(index, tuple) else _data(index)
    return s.GetItem.apply(a, index=index)


def gather(weight, ids) -> Tensor:
    """Embedding lookup: weight (V, D), integer ids (...) → (..., D)."""
    return s.Gather.apply(weight, weight.xp.asarray(_data(ids)))


def concat(tensors, axis=0) -> Tensor:
    return s.Concat.apply(*tensors, axis=axis)


def stack(tensors, axis=0) -> Tensor:
    expanded = []
    for t in tensors:
        shape = list(t.shape)
        shape.insert(axis % (len(shape) + 1), 1)
        expanded.append(reshape(t, tuple(shape)))
    return concat(expanded, axis=axis)


def split(a, sections, axis=-1) -> list[Tensor]:
    """Split into ``sections`` equal parts (an int) or parts of the given sizes (a list)."""
    n = a.shape[axis]
    if isinstance(sections, int):
        if n % sections:
            raise ValueError(f"cannot split an axis of {n} into {sections} equal parts")
        sizes = [n // sections] * sections
    else:
        sizes = list(sections)
        if builtins.sum(sizes) != n:
            raise ValueError(f"split sizes {sizes} do not add up to the axis length {n}")
    parts, start = [], 0
    for size in sizes:
        index = [slice(None)] * a.ndim
        index[axis] = slice(start, start + size)
        parts.append(getitem(a, tuple(index)))
        start += size
    return parts


def where(cond, a, b) -> Tensor:
    return s.Where.apply(_data(cond), a, b)


def masked_fill(a, mask, value) -> Tensor:
    return s.MaskedFill.apply(a, _data(mask), value)


def softmax(x, axis=-1) -> Tensor:
    return nn.Softmax.apply(x, axis=axis)


def scaled_masked_softmax(x, scale: float, hidden=None) -> Tensor:
    """softmax(``scale``·x, the ``hidden`` entries at −∞) along the last axis, as one op
    (attention's weights: the fused op, whose plain form is a product, a masked fill and a
    softmax)."""
    return fused.ScaledMaskedSoftmax.apply(x, _data(hidden), scale)


def log_softmax(x, axis=-1) -> Tensor:
    return nn.LogSoftmax.apply(x, axis=axis)


def dropout(x, p: float, generator, training: bool = True) -> Tensor:
    """Zero each entry with probability ``p``; identity in eval. ``generator`` (a
    ``DeviceRandom``) draws the mask on ``x``'s device: no host copy per call."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x
    if kernels.fused(_data(x)):  # the mask drawn in the kernel that applies it
        return fused.Dropout.apply(x, generator, p)
    keep = generator.keep(x.shape, p, x.xp)  # (*x.shape) bool, on x's device
    return nn.Dropout.apply(x, keep, p)


def linear(x, w, b=None) -> Tensor:
    return nn.Linear.apply(x, w, b) if b is not None else nn.Linear.apply(x, w)


def carry(x, loss) -> Tensor:
    """``x`` itself, carrying the scalar ``loss`` into backward with gradient 1: a layer's own
    term of a summed objective, wherever that objective is computed."""
    return nn.Carry.apply(x, loss)


def layer_norm(x, gamma, beta, eps=1e-5) -> Tensor:
    return (fused.LayerNorm if kernels.fused(_data(x)) else nn.LayerNorm).apply(x, gamma, beta,
                                                                                eps=eps)


def cross_entropy(logits, targets, ignore_index=-100, reduction="mean") -> Tensor:
    """Mean (or summed) −log softmax(logits)[target] over targets ≠ ``ignore_index``."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    op = fused.CrossEntropy if kernels.fused(_data(logits)) else nn.CrossEntropy
    return op.apply(logits, _data(targets), ignore_index=ignore_index, reduction=reduction)


def binary_cross_entropy_with_logits(logits, targets, reduction="mean") -> Tensor:
    """Mean (or summed) logistic loss of logits against targets in [0, 1] (labels 0/1), with
    ``log σ`` computed stably from the logits."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    if tuple(_data(targets).shape) != tuple(logits.shape):
        raise ValueError(f"targets {tuple(_data(targets).shape)} must have the logits' shape "
                         f"{tuple(logits.shape)}")
    return nn.BinaryCrossEntropyWithLogits.apply(logits, _data(targets), reduction=reduction)
