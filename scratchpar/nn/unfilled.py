"""Deferred initialization: a model built with its parameters' shapes and how to draw them,
and none of their values, so that a rank draws only the blocks it will hold.

Inside ``with deferred():`` every draw of :mod:`~scratchpar.nn.init` returns an
:class:`Unfilled` array in place of its values: the shape and dtype, no memory, and the
generator's state before the draw, which is then advanced past it as the draw itself would
(every initializer draws on the host, in construction order, so each parameter's values
depend only on that state). A strategy that holds a block of a parameter reads the block with
:func:`values`, which replays the one draw: one whole array at a time, on the host, cut, then
moved to the device. The weights are bit for bit those an eager construction gives, so a
deferred run equals one device as an eager one does. A strategy that holds the whole model
fills it (:func:`fill`) as it starts.

This is how a rank of a large run starts with its share only (PyTorch's ``meta`` device and
Megatron's ``use_cpu_initialization`` serve the same end); an unfilled array refuses
arithmetic, so a parameter nobody filled can never train on stand-in values.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..backend import get_array_module, to_device, xp_default

_deferring = False


class UnfilledError(RuntimeError):
    """Arithmetic on a parameter that was never drawn."""


@dataclass(frozen=True)
class Recipe:
    """One parameter's values: ``draw`` (a host generator → the float64 array, C order) from
    the generator state ``state`` (``None``: it draws nothing), cast to each of ``dtypes``."""

    state: dict | None
    draw: Callable
    dtypes: tuple

    def whole(self) -> np.ndarray:
        """The parameter's array on the host, as an eager construction made it."""
        gen = None
        if self.state is not None:
            bits = getattr(np.random, self.state["bit_generator"])()
            bits.state = self.state
            gen = np.random.Generator(bits)
        out = np.asarray(self.draw(gen), dtype=self.dtypes[0])  # what to_device casts
        for dtype in self.dtypes[1:]:
            out = out.astype(dtype)  # Module.to_dtype's casts, in order
        return out

    def cast(self, dtype) -> Recipe:
        return Recipe(self.state, self.draw, (*self.dtypes, np.dtype(dtype)))


class Unfilled(np.ndarray):
    """A parameter's array before it is drawn: its shape and dtype, every element one shared
    zero (no memory), read-only, and its :class:`Recipe`. Arithmetic raises
    :class:`UnfilledError`; a cast (``astype``) stays unfilled and casts the recipe."""

    def __new__(cls, shape, recipe: Recipe):
        out = np.broadcast_to(np.zeros((), recipe.dtypes[-1]), tuple(shape)).view(cls)
        out.recipe = recipe
        return out

    def __array_finalize__(self, obj):
        self.recipe = getattr(obj, "recipe", None)

    def _refuse(self, *args, **kwargs):
        raise UnfilledError(f"an unfilled {self.shape} parameter (built under nn.deferred()) "
                            "has no values yet: the strategy that holds it draws it "
                            "(nn.unfilled.values, nn.unfilled.fill)")

    __array_ufunc__ = __array_function__ = __getitem__ = __setitem__ = copy = _refuse

    def astype(self, dtype, *args, **kwargs) -> Unfilled:
        return Unfilled(self.shape, self.recipe.cast(dtype))

    def __repr__(self) -> str:
        return f"Unfilled({self.shape}, {self.dtype})"


@contextlib.contextmanager
def deferred():
    """Inside this block, :mod:`~scratchpar.nn.init`'s draws return :class:`Unfilled` arrays."""
    global _deferring
    previous, _deferring = _deferring, True
    try:
        yield
    finally:
        _deferring = previous


def drawn(gen: np.random.Generator | None, draw: Callable, shape, dtype):
    """``draw(gen)`` (a float64 host array of ``shape``) on the device in ``dtype``; while
    deferring, its :class:`Unfilled` stand-in, with ``gen`` advanced past the draw."""
    if not _deferring:
        return to_device(draw(gen), dtype=dtype)
    state = None if gen is None else gen.bit_generator.state  # a copy
    if gen is not None:
        draw(gen)  # the stream moves on as the eager draw moves it; the values are dropped
    return Unfilled(shape, Recipe(state, draw, (np.dtype(dtype),)))


def is_unfilled(array) -> bool:
    return isinstance(array, Unfilled)


def values(array, block=None):
    """A new C-ordered device array of ``block`` (a :class:`~scratchpar.parallel.pieces.
    Block`; ``None``: all) of ``array``, drawn where it is unfilled, shaped as the block."""
    if is_unfilled(array):
        whole = array.recipe.whole()  # (whole): the one draw, on the host
        return to_device(np.ascontiguousarray(whole if block is None else block.take(whole)))
    part = array if block is None else block.take(array)
    return get_array_module(array).array(part, order="C")  # a copy, never a view


def part(array, block=None, shape=None):
    """``block`` (``None``: all) of ``array`` as a new array shaped ``shape`` (default: the
    block's): its :func:`values`, or, where ``array`` is unfilled, an unfilled array that
    draws that block alone when it is filled (a tensor-parallel shard of a layer that another
    pipeline stage holds is never drawn)."""
    shape = tuple(shape or (array.shape if block is None else block.shape))
    if not is_unfilled(array):
        return values(array, block).reshape(shape)
    if block is None:
        return array
    recipe = array.recipe
    drawn = Recipe(recipe.state, lambda gen: block.take(recipe.draw(gen)).reshape(shape),
                   recipe.dtypes)
    return Unfilled(shape, drawn)


def fill(params) -> None:
    """Draw every unfilled parameter of ``params`` whole, in place."""
    for p in params:
        if is_unfilled(p.data):
            p.data = values(p.data)


def module_of(params):
    """The array module the parameters will live in: the device's, where any is unfilled."""
    arrays = [p.data for p in params]
    return xp_default() if any(is_unfilled(a) for a in arrays) else get_array_module(*arrays)


def check_same_draws(comm, params) -> None:
    """Raise ``ValueError`` on every rank of ``comm`` unless all drew their unfilled
    parameters from the same recipes (the same generator states, shapes and dtypes): ranks
    that draw their blocks instead of receiving rank 0's must start from one model."""
    h = hashlib.sha256()
    for p in params:
        if is_unfilled(p.data):
            h.update(repr((p.data.recipe.state, p.shape, p.data.recipe.dtypes)).encode())
    if len(set(comm.allgather_obj(h.hexdigest(), "unfilled draws"))) > 1:
        raise ValueError("the ranks built their unfilled models differently (another seed, "
                         "shape or dtype): build the one model alike on every rank")
