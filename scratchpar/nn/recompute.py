"""Activation recomputation: a layer keeps only its input, and runs its forward again in backward.

Chen et al. 2016 ("Training Deep Nets with Sublinear Memory Cost", §3): of a layer's activations
only the input is stored; backward recomputes the rest from it, one more forward for every
layer, in exchange for the graph of one layer at a time instead of all of them.
"""

from __future__ import annotations

from ..autograd import Function, Tensor, no_grad
from .layers import Dropout
from .module import Module


class Recompute(Function):
    """``layer(x)``, its graph dropped at once; in backward, rebuilt from ``x`` and the dropout
    streams' positions as forward left them, so that every mask is drawn again alike, and
    differentiated. The layer's ``weights`` are inputs, so the outer backward hands them their
    gradients as it hands any leaf's (data parallelism's hooks see them as usual)."""

    @staticmethod
    def forward(ctx, x, *weights, layer: Module):
        ctx.layer, ctx.x = layer, x
        ctx.streams = {id(g): g for g in _streams(layer)}.values()
        ctx.positions = [g.state for g in ctx.streams]
        with no_grad():
            return layer.forward(Tensor(x)).data

    @staticmethod
    def backward(ctx, g):
        params = ctx.layer.parameters()
        held = [p.grad for p in params]  # the outer backward's, for accumulation: set aside
        now = [s.state for s in ctx.streams]
        for stream, position in zip(ctx.streams, ctx.positions):
            stream.state = position  # the masks of forward, drawn again
        for p in params:
            p.grad = None
        x = Tensor(ctx.x, requires_grad=ctx.needs_input_grad[0])
        ctx.layer.forward(x).backward(g)
        for stream, position in zip(ctx.streams, now):
            stream.state = position
        grads = (x.grad, *(p.grad for p in params))
        for p, grad in zip(params, held):
            p.grad = grad
        return grads


def recomputed(layer: Module, x: Tensor) -> Tensor:
    """``layer(x)``, keeping of its activations only ``x`` (:class:`Recompute`)."""
    return Recompute.apply(x, *layer.parameters(), layer=layer)


def _streams(layer: Module) -> list:
    """The dropout streams ``layer`` draws from while training."""
    return [m.gen for _, m in layer.named_modules()
            if isinstance(m, Dropout) and m.gen is not None and m.training and m.p > 0]


def recompute(layers) -> None:
    """Each of ``layers`` keeps only its input from now on, while the graph is recorded."""
    for layer in layers:
        layer._recompute = recomputed
