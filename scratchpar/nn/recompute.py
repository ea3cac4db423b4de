"""Activation recomputation: a layer keeps only its inputs, and runs its forward again in backward.

Chen et al. 2016 ("Training Deep Nets with Sublinear Memory Cost", §3): of a layer's activations
only the input is stored; backward recomputes the rest from it, one more forward for every
layer, in exchange for the graph of one layer at a time instead of all of them. Selective
recomputation (Korthikanti et al. 2022, §4.2) marks only the attention core, whose T × T arrays
are most of a transformer layer's memory and little of its work.
"""

from __future__ import annotations

from ..autograd import Function, Hooks, Tensor, Weights, no_grad
from .attention import AttentionCore
from .layers import Dropout
from .module import Module


class Recompute(Function):
    """``layer(*xs)`` (its first ``count`` inputs), its graph dropped at once; in backward,
    rebuilt from ``xs`` and the dropout streams' positions as forward left them, so that every
    mask is drawn again alike, and differentiated. The layer's ``weights`` (the other inputs)
    are inputs, so the outer backward hands them their gradients as it hands any leaf's (data
    parallelism's hooks see them as usual)."""

    @staticmethod
    def forward(ctx, *arrays, layer: Module, count: int):
        ctx.layer, ctx.xs = layer, arrays[:count]
        ctx.streams = {id(g): g for g in _streams(layer)}.values()
        ctx.positions = [g.state for g in ctx.streams]
        with no_grad():
            return layer.forward(*map(Tensor, ctx.xs)).data

    @staticmethod
    def backward(ctx, g):
        params = ctx.layer.parameters()
        held = [p.grad for p in params]  # the outer backward's, for accumulation: set aside
        now = [s.state for s in ctx.streams]
        for stream, position in zip(ctx.streams, ctx.positions):
            stream.state = position  # the masks of forward, drawn again
        for p in params:
            p.grad = None
        count = len(ctx.xs)
        xs = [Tensor(x, requires_grad=need) for x, need in zip(ctx.xs, ctx.needs_input_grad)]
        # a zero-bubble pipeline's B asks for the inputs' gradients alone (its W, for the
        # weights', runs this again): the weights' products are left out, never run
        hooks = Hooks() if True in ctx.needs_input_grad[count:] else Weights(params)
        ctx.layer.forward(*xs).backward(g, hooks=hooks)
        for stream, position in zip(ctx.streams, now):
            stream.state = position
        grads = (*(x.grad for x in xs), *(p.grad for p in params))
        for p, grad in zip(params, held):
            p.grad = grad
        return grads


def recomputed(layer: Module, *xs: Tensor) -> Tensor:
    """``layer(*xs)``, keeping of its activations only ``xs`` (:class:`Recompute`)."""
    return Recompute.apply(*xs, *layer.parameters(), layer=layer, count=len(xs))


def _streams(layer: Module) -> list:
    """The dropout streams ``layer`` draws from while training."""
    return [m.gen for _, m in layer.named_modules()
            if isinstance(m, Dropout) and m.gen is not None and m.training and m.p > 0]


def recompute(layers) -> None:
    """Each of ``layers`` keeps only its inputs from now on, while the graph is recorded."""
    for layer in layers:
        layer._recompute = recomputed


def chosen(model: Module, mode: str) -> list[Module]:
    """The layers of ``model`` that ``--recompute mode`` recomputes. ``full``: every layer the
    model lists but the last (Chen et al. 2016): the last one's backward comes first, so its
    activations would be recomputed at once, for no memory saved. ``selective``: each
    attention core alone (Korthikanti et al. 2022, §4.2). ``none``: none."""
    if mode == "full":
        return model.pipeline_layers()[:-1]
    if mode == "selective":
        return [m for _, m in model.named_modules() if isinstance(m, AttentionCore)]
    return []
