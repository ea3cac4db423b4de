"""The gradients that reach each tensor during one backward, added up as they arrive.

A slice's gradient is zero everywhere but the slice. Made whole, each of a recurrent model's T
time-step slices ``xw[:, t]`` allocates a (B, T, G·H) array and adds it to the others, and
backward costs O(T²). :class:`Partial` keeps a slice's gradient as its values and its index;
:class:`Sums` adds the gradients of one tensor into a buffer of its own, writing a partial one
into its slice alone, so that each slice costs its own size. The sums are the same, added in
the same order, as if every slice's gradient had been made whole.
"""

from __future__ import annotations

from ..backend import get_array_module


class Partial:
    """Zeros of ``shape`` but ``values`` at the basic ``index``: a slice's gradient, unmade."""

    __slots__ = ("shape", "index", "values")

    def __init__(self, shape: tuple, index, values) -> None:
        self.shape, self.index, self.values = shape, index, values

    def whole(self):
        xp = get_array_module(self.values)
        grad = xp.zeros(self.shape, dtype=self.values.dtype)
        grad[self.index] = self.values
        return grad


class Sums:
    """Gradients by tensor (``id``). A buffer this backward allocated is added to in place;
    any other array, which an op may still hold, is copied before the first write."""

    def __init__(self) -> None:
        self._grads: dict = {}
        self._owned: set[int] = set()  # ids of buffers made here, each alive in _grads

    def add(self, key: int, grad) -> None:
        have = self._grads.get(key)
        if have is None:
            self._grads[key] = grad
            return
        if type(have) is Partial:
            have, grad = grad, have  # the whole one, if either is, receives the other
        if type(have) is Partial:
            have = have.whole()
            self._owned.add(id(have))
        elif type(grad) is Partial and id(have) not in self._owned:
            have = have.copy()
            self._owned.add(id(have))
        if type(grad) is Partial:
            have[grad.index] += grad.values
        elif id(have) in self._owned and have.shape == grad.shape and have.dtype == grad.dtype:
            have += grad
        else:
            self._owned.discard(id(self._grads[key]))
            have = have + grad
            self._owned.add(id(have))
        self._grads[key] = have

    def pop(self, key: int):
        """The sum for ``key``, whole, and forgotten here; None if nothing reached it."""
        grad = self._grads.pop(key, None)
        self._owned.discard(id(grad))
        return grad.whole() if type(grad) is Partial else grad
