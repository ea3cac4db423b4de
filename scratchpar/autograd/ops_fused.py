"""The GPU's fused ops: each the plain op of ``ops_nn.py`` or ``ops_math.py`` (the equations a
reader learns from), launching one kernel of ``scratchpar/kernels`` each way on CuPy arrays and
running its plain parent's code elsewhere. ``kernels.fused`` says which an op runs; on the CPU
the fused ops equal the plain ones bit for bit (``tests/autograd/test_autograd_fused.py``)."""

from __future__ import annotations

from .. import kernels
from ..backend import get_array_module
from ..device_rng import DeviceRandom
from ..kernels import cross_entropy, dropout, gelu, layer_norm, softmax
from ..kernels.cuda import accumulator
from . import ops_math, ops_nn
from .precision import weak


class LayerNorm(ops_nn.LayerNorm):
    """Layer norm, one kernel each way (``kernels/layer_norm.py``)."""

    @staticmethod
    def forward(ctx, x, gamma, beta, eps=1e-5):
        ctx.fused = kernels.on_gpu(x, gamma, beta) and x.dtype == gamma.dtype == beta.dtype
        if not ctx.fused:
            return ops_nn.LayerNorm.forward(ctx, x, gamma, beta, eps)
        out, ctx.xhat, ctx.rstd = layer_norm.forward(x, gamma, beta, eps)
        ctx.gamma = gamma
        return out

    @staticmethod
    def backward(ctx, g):
        if not ctx.fused:
            return ops_nn.LayerNorm.backward(ctx, g)
        return layer_norm.backward(_contiguous(g), ctx.xhat, ctx.rstd, ctx.gamma)


class GELU(ops_math.GELU):
    """GELU, one kernel each way (``kernels/gelu.py``)."""

    @staticmethod
    def forward(ctx, a):
        ctx.fused = kernels.on_gpu(a)
        if not ctx.fused:
            return ops_math.GELU.forward(ctx, a)
        out, ctx.s = gelu.forward(a)
        ctx.a = a
        return out

    @staticmethod
    def backward(ctx, g):
        if not ctx.fused:
            return ops_math.GELU.backward(ctx, g)
        return gelu.backward(_contiguous(g), ctx.a, ctx.s)


class Dropout(ops_nn.Dropout):
    """Inverted dropout whose mask ``generator`` draws, drawn and applied in one kernel
    (``kernels/dropout.py``); a generator other than the stream itself (a tensor-parallel
    window of it) draws the mask as the plain op does."""

    @staticmethod
    def forward(ctx, x, generator, p):
        ctx.fused = kernels.on_gpu(x) and type(generator) is DeviceRandom
        if not ctx.fused:
            keep = generator.keep(x.shape, p, get_array_module(x))  # (*x.shape) bool
            return ops_nn.Dropout.forward(ctx, x, keep, p)
        out, ctx.keep = dropout.forward(x, generator, p)
        ctx.p = p
        return out

    @staticmethod
    def backward(ctx, g):
        if not ctx.fused:
            return ops_nn.Dropout.backward(ctx, g)[0], None, None
        return dropout.backward(_contiguous(g), ctx.keep, ctx.p), None, None


class ScaledMaskedSoftmax(ops_nn.Softmax):
    """softmax(s·x, the ``hidden`` entries at −∞) along the last axis: attention's weights
    (Vaswani et al. 2017, eq. 1), which the plain ops form as a product by s, a masked fill and
    a softmax; one kernel each way (``kernels/softmax.py``). Backward is the softmax's, then
    the scale's: dx = s·y ⊙ (g − Σ g ⊙ y), and a hidden entry's y is 0."""

    @staticmethod
    def forward(ctx, x, hidden, scale):
        ctx.scale = scale
        ctx.fused = kernels.on_gpu(x) and (hidden is None or hidden.shape == x.shape[-2:])
        if ctx.fused:
            ctx.out = y = softmax.forward(x, scale, hidden)
            return y
        a, s = weak(x, scale)
        scaled = a * s  # (..., Tq, Tk) rounded as the plain product by s rounds it
        if hidden is not None:
            scaled = get_array_module(x).where(hidden, x.dtype.type(float("-inf")), scaled)
        return ops_nn.Softmax.forward(ctx, scaled, axis=-1)

    @staticmethod
    def backward(ctx, g):
        if ctx.fused:
            return softmax.backward(_contiguous(g), ctx.out, ctx.scale), None, None
        dx, s = weak(ops_nn.Softmax.backward(ctx, g), ctx.scale)
        return dx * s, None, None


class CrossEntropy(ops_nn.CrossEntropy):
    """Softmax cross-entropy, one kernel each way (``kernels/cross_entropy.py``), its rows'
    losses summed and scaled as the plain op sums and scales them."""

    @staticmethod
    def forward(ctx, logits, targets, ignore_index=-100, reduction="mean"):
        ctx.fused = (kernels.on_gpu(logits) and logits.ndim == 2 and targets.dtype == "int64"
                     and targets.flags.c_contiguous)
        if not ctx.fused:
            return ops_nn.CrossEntropy.forward(ctx, logits, targets, ignore_index, reduction)
        ctx.probs, losses = cross_entropy.forward(logits, targets, ignore_index)
        ctx.targets, ctx.ignore = targets, ignore_index
        return ops_nn.reduced(ctx, losses, targets != ignore_index, reduction,
                              accumulator(logits.dtype))

    @staticmethod
    def backward(ctx, g):
        if not ctx.fused:
            return ops_nn.CrossEntropy.backward(ctx, g)
        xp = get_array_module(g)
        scale = xp.asarray(g * ctx.scale, dtype=accumulator(ctx.probs.dtype))  # 0-d
        return cross_entropy.backward(ctx.probs, ctx.targets, ctx.ignore, scale), None


def _contiguous(g):
    """``g`` as a C-contiguous array, as the kernels read it (a copy only where it is not)."""
    return g if g.flags.c_contiguous else get_array_module(g).ascontiguousarray(g)
