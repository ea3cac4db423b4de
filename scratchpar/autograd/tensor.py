"""Tensor and Function: the reverse-mode autograd graph and its backward pass."""

from __future__ import annotations

import contextlib

import numpy as np

from ..backend import get_array_module, xp_default
from .sums import Sums
from .weights import Weights

_grad_enabled = True
_saved_hooks = None  # (pack, unpack) while a saved_arrays_hooks block is open


@contextlib.contextmanager
def no_grad():
    """Inside this block, operations record no graph (evaluation, optimizer updates)."""
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, False
    try:
        yield
    finally:
        _grad_enabled = previous


def is_grad_enabled() -> bool:
    return _grad_enabled


@contextlib.contextmanager
def saved_arrays_hooks(pack, unpack):
    """Inside this block, what each recorded op keeps for backward passes through ``pack`` as
    it is saved, and through ``unpack`` for the duration of its backward only (the idea of
    torch.autograd.graph.saved_tensors_hooks): ZeRO-3 saves a token instead of a gathered
    parameter, so the parameter can be freed after forward and gathered again for backward.
    ``pack(value)`` sees every attribute the op set on its context and returns it, or what
    stands for it; ``unpack`` turns that back into the value."""
    global _saved_hooks
    previous, _saved_hooks = _saved_hooks, (pack, unpack)
    try:
        yield
    finally:
        _saved_hooks = previous


def _is_array(x) -> bool:
    """A NumPy array or scalar, or a device array (CuPy's or the double's)."""
    return isinstance(x, (np.ndarray, np.generic)) or get_array_module(x) is not np


class Context:
    """What one application of a Function keeps for its backward: where each input came from,
    flags, saved arrays.

    ``parents`` names, for each input that needs a gradient, the Context of the op that made
    it, or the leaf Tensor itself; ``None`` for the others. The graph links operations, not
    their outputs (as PyTorch's ``grad_fn`` does): an op's output lives while someone holds its
    Tensor or an op saved its array for backward, not for as long as the graph does.
    """

    __slots__ = ("fn", "parents", "needs_input_grad", "unpack", "__dict__")


@contextlib.contextmanager
def _unpacked(ctx):
    """The context's saved values unpacked for the time of its backward."""
    packed = ctx.__dict__
    ctx.__dict__ = {name: ctx.unpack(value) for name, value in packed.items()}
    try:
        yield
    finally:
        ctx.__dict__ = packed  # the unpacked values are dropped again with backward done


class Function:
    """One differentiable operation: ``forward(ctx, *arrays)`` and ``backward(ctx, grad)``.

    ``backward`` returns one gradient per input of ``forward`` (``None`` where an input needs
    none), each shaped like that input. It must never modify ``grad`` in place. Subclasses
    define both as static methods and are used through :meth:`apply`.
    """

    @classmethod
    def apply(cls, *inputs, **kwargs) -> Tensor:
        ctx = Context()
        arrays, needs = [], []
        for x in inputs:
            is_tensor = isinstance(x, Tensor)
            arrays.append(x.data if is_tensor else x)
            needs.append(is_tensor and x.requires_grad)
        ctx.needs_input_grad = needs = tuple(needs)
        out = cls.forward(ctx, *arrays, **kwargs)
        if _grad_enabled and True in needs:
            ctx.fn = cls
            ctx.parents = tuple((x if x._ctx is None else x._ctx) if need else None
                                for x, need in zip(inputs, needs))
            ctx.unpack = None
            if _saved_hooks is not None:
                pack, ctx.unpack = _saved_hooks
                ctx.__dict__ = {name: pack(value) for name, value in ctx.__dict__.items()}
            result = Tensor(out, requires_grad=True)
            result._ctx = ctx
            return result
        return Tensor(out)


class Tensor:
    """An array with an optional gradient and the operation that produced it.

    ``data`` is a NumPy or CuPy array. Leaves with ``requires_grad`` receive ``.grad`` from
    :meth:`backward`; gradients accumulate across calls until cleared.
    """

    __slots__ = ("data", "grad", "requires_grad", "_ctx", "__weakref__")
    __array_priority__ = 1000  # ndarray <op> Tensor defers to Tensor's reflected operator

    def __init__(self, data, requires_grad: bool = False):
        if isinstance(data, Tensor):
            raise TypeError("Tensor(data) takes an array, not a Tensor; use .detach()")
        if not _is_array(data):
            data = xp_default().asarray(data)
        self.data = data
        self.grad = None
        self.requires_grad = requires_grad
        self._ctx = None

    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    dtype = property(lambda self: self.data.dtype)
    size = property(lambda self: self.data.size)
    xp = property(lambda self: get_array_module(self.data))
    is_leaf = property(lambda self: self._ctx is None)

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        flag = ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor({self.data!r}{flag})"

    def item(self) -> float:
        return self.data.item()

    def detach(self) -> Tensor:
        """The same data, cut from the graph."""
        return Tensor(self.data)

    def backward(self, grad=None, *, on_grad_ready=None, later=None) -> Weights | None:
        """Accumulate d(self)/d(leaf) · grad into every leaf's ``.grad`` (chain rule, reversed).

        ``on_grad_ready(leaf)``, if given, is called once per leaf reached, as soon as its
        ``.grad`` is final: every consumer of a node is visited before it, so a leaf receives its
        whole gradient at once (data parallelism starts communicating it during backward).

        ``later``: leaves (a stage's weights) whose gradients wait. Each op that reads one runs
        now for its other inputs only; the returned :class:`~.weights.Weights` computes the
        rest when run (a zero-bubble pipeline's W).
        """
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad")
        if grad is None:
            if self.data.size != 1:
                raise RuntimeError(f"backward() of a non-scalar {self.shape} needs a grad")
            grad = self.xp.ones_like(self.data)
        else:
            grad = self.xp.array(grad.data if isinstance(grad, Tensor) else grad, copy=True)
            if grad.shape != self.shape:
                raise ValueError(f"grad of shape {grad.shape} for a tensor of shape {self.shape}")
        grads = Sums()
        root = self if self._ctx is None else self._ctx
        grads.add(id(root), grad)
        given = set()
        waiting = {id(leaf) for leaf in later} if later is not None else set()
        weights = Weights(_run, given) if later is not None else None
        for node in _topological_order(root):
            g = grads.pop(id(node))
            if g is None:
                continue
            if type(node) is not Context:  # a leaf Tensor
                node._accumulate(g, given)
                if on_grad_ready is not None:
                    on_grad_ready(node)
                continue
            needs = node.needs_input_grad
            if waiting:
                wait = tuple(id(p) in waiting for p in node.parents)
                if True in wait:
                    weights.add(node, g, wait)
                    needs = tuple(n and not w for n, w in zip(needs, wait))
            if True not in needs:
                continue
            for parent, need, pg in zip(node.parents, needs, _run(node, g, needs)):
                if need and pg is not None:
                    grads.add(id(parent), pg)
        return weights

    def _accumulate(self, g, given: set) -> None:
        # A leaf must own its gradient: an array already handed to another leaf, or a view of
        # one (reshape, broadcast), is copied so that in-place updates never reach two leaves.
        if id(g) in given or g.base is not None:
            g = g.copy()
        given.add(id(g))
        self.grad = g if self.grad is None else self.grad + g


def _run(node: Context, g, needs: tuple[bool, ...]) -> tuple:
    """The gradients of ``node``'s inputs that ``needs`` marks (its own, or a part of them),
    from its output's ``g``."""
    own, node.needs_input_grad = node.needs_input_grad, needs
    try:
        if node.unpack is None:
            grads = node.fn.backward(node, g)
        else:
            with _unpacked(node):
                grads = node.fn.backward(node, g)
    finally:
        node.needs_input_grad = own
    return grads if type(grads) is tuple else (grads,)


def _topological_order(root) -> list:
    """The nodes reachable from ``root`` (Contexts, and leaf Tensors), each before the inputs
    it was computed from."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            # A leaf goes in just before its first consumer here, so just after its last one
            # once reversed: backward finishes it as early as possible.
            for parent in node.parents:
                if type(parent) not in (Context, type(None)) and id(parent) not in seen:
                    seen.add(id(parent))
                    order.append(parent)
            order.append(node)
            continue
        if id(node) in seen:
            continue
        if type(node) is not Context:  # a leaf: placed by its consumer, or alone as the root
            if node is root:
                order.append(node)
            continue
        seen.add(id(node))
        stack.append((node, True))
        for parent in node.parents:
            if parent is not None and id(parent) not in seen:
                stack.append((parent, False))
    order.reverse()
    return order
