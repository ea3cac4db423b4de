"""Tensor and Function: the reverse-mode autograd graph, its backward pass, and its one hook point.

Reverse mode (Baydin et al. 2018, "Automatic differentiation in machine learning: a survey",
§3.2; Griewank & Walther 2008, "Evaluating Derivatives", ch. 3): forward records each operation
and what it needs for its derivative; backward visits the operations in reverse, each once every
consumer of its output has passed back its share, and passes on to its inputs

    v̄ᵢ += v̄ⱼ · ∂vⱼ/∂vᵢ      (the adjoint of input vᵢ of operation vⱼ)

What parallelism adds (ZeRO-3's saved arrays, a zero-bubble pipeline's deferred weight
gradients, data parallelism's gradient buckets) joins this at one place only, :class:`Hooks`:
each is a subclass in a file of its own, ``saved.py``, ``weights.py``, ``ready.py``.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..backend import get_array_module, xp_default
from .sums import Sums

_grad_enabled = True
_recording = None  # the Hooks whose ``recorded`` sees each op, while a recording block is open


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


class Hooks:
    """The engine's one hook point: three moments, each a method a feature overrides. This class
    itself is the plain engine, and what ``Tensor.backward()`` uses when given none.

    - :meth:`recorded`, in forward, inside ``with recording(hooks)``: an op was just recorded.
      (ZeRO-3 swaps the parameters an op saved for tokens: ``saved.py``.)
    - :meth:`propagate`, in backward, passed as ``tensor.backward(hooks=hooks)``: a node's turn
      to pass its gradient to its inputs. (A zero-bubble pipeline's B keeps the weights' share
      for its W: ``weights.py``.)
    - :meth:`grad_ready`, in backward: a leaf's ``.grad`` is final. (Data parallelism starts
      the leaf's bucket: ``ready.py``.)

    A Hooks given to a backward serves that one, and what it leaves for later: ``handed`` keeps
    the ids of the arrays given to leaves, so that no array is given to two.
    """

    def __init__(self) -> None:
        self.handed: set[int] = set()

    def recorded(self, ctx: Context) -> None:
        """``ctx`` holds its op, its parents, and what the op's forward saved on it."""

    def propagate(self, node: Context, g) -> tuple:
        """The gradients of ``node``'s inputs (None where none flows), from its output's ``g``."""
        return node.vjp(g, node.needs_input_grad)

    def grad_ready(self, leaf: Tensor) -> None:
        """``leaf.grad`` now holds all that this backward adds to it."""


@contextlib.contextmanager
def recording(hooks: Hooks):
    """Inside this block, ``hooks.recorded(ctx)`` sees the context of each op recorded."""
    global _recording
    previous, _recording = _recording, hooks
    try:
        yield
    finally:
        _recording = previous


def _is_array(x) -> bool:
    """A NumPy array or scalar, or a device array (CuPy's or the double's)."""
    return isinstance(x, (np.ndarray, np.generic)) or get_array_module(x) is not np


class Context:
    """What one application of a Function keeps for its backward: where each input came from,
    flags, saved arrays.

    ``fn`` is the op's Function (recorded under :class:`~.saved.SavedArrays`, a wrapper that
    runs its backward on the saved values unpacked). ``parents`` names, for each input that
    needs a gradient, the Context of the op that made it, or the leaf Tensor itself; ``None``
    for the others. The graph links operations, not their outputs (as PyTorch's ``grad_fn``
    does): an op's output lives while someone holds its Tensor or an op saved its array for
    backward, not for as long as the graph does.
    """

    __slots__ = ("fn", "parents", "needs_input_grad", "__dict__")

    def vjp(self, g, needs: tuple[bool, ...]) -> tuple:
        """gᵀ · ∂out/∂x for each input x that ``needs`` marks (the op's own marks, or some of
        them), None for the others: the op's backward, told that only those are needed."""
        own, self.needs_input_grad = self.needs_input_grad, needs
        try:
            grads = self.fn.backward(self, g)
        finally:
            self.needs_input_grad = own
        grads = grads if type(grads) is tuple else (grads,)
        return tuple(grad if need else None for grad, need in zip(grads, needs))


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
            if _recording is not None:
                _recording.recorded(ctx)
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

    def backward(self, grad=None, *, hooks: Hooks | None = None) -> None:
        """Accumulate d(self)/d(leaf) · grad into every leaf's ``.grad`` (:func:`backpropagate`);
        ``grad`` may be left out for a scalar. ``hooks``: what joins this backward (:class:`Hooks`),
        none for ordinary use."""
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
        root = self if self._ctx is None else self._ctx
        backpropagate(root, grad, Hooks() if hooks is None else hooks)

    def _accumulate(self, g, handed: set) -> None:
        # A leaf must own its gradient: an array already handed to another leaf, or a view of
        # one (reshape, broadcast), is copied so that in-place updates never reach two leaves.
        if id(g) in handed or g.base is not None:
            g = g.copy()
        handed.add(id(g))
        self.grad = g if self.grad is None else self.grad + g


def backpropagate(root, grad, hooks: Hooks) -> None:
    """Reverse mode's sweep from ``root`` (a Context, or a leaf) whose adjoint is ``grad``: each
    node, once every consumer has run, passes v̄ᵢ += v̄ⱼ · ∂vⱼ/∂vᵢ to its inputs (Baydin et al.
    2018, §3.2), and each leaf adds the sum that reached it into its ``.grad``."""
    grads = Sums()  # the adjoints v̄, summed per node as they arrive
    grads.add(id(root), grad)
    for node in _topological_order(root):
        g = grads.pop(id(node))
        if g is None:  # no path from root reaches it through ops that need a gradient
            continue
        if type(node) is Context:
            for parent, pg in zip(node.parents, hooks.propagate(node, g)):
                if pg is not None:
                    grads.add(id(parent), pg)
        else:  # a leaf Tensor: all its consumers came before it, so its gradient is whole
            node._accumulate(g, hooks.handed)
            hooks.grad_ready(node)


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
