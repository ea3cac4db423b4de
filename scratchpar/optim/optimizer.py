"""The optimizer base class: parameters, learning rate, step count, per-parameter state."""

from __future__ import annotations

import abc
import copy

import numpy as np

from scratchpar.backend import get_array_module, to_host


class Optimizer(abc.ABC):
    """Updates ``p.data`` in place from ``p.grad`` for every parameter whose gradient is not None.

    A parameter is any object with ``.data`` (an xp array, never rebound) and ``.grad`` (an array
    of the same shape, or None). Per-parameter state lives in ``self.state[i]`` (``i`` = index in
    ``self.params``): arrays shaped like the parameter, named in ``buffers``, and integers, named in
    ``counters``. A parameter's state is created on its first update. A subclass sets those names
    and defines ``_update(i, p)``, the update of parameter ``i``.
    """

    buffers: tuple[str, ...] = ()
    counters: tuple[str, ...] = ()
    early: tuple[str, ...] = ()  # buffers a parameter may hold alone, before its first update
    grad_scale = 1.0  # the factor the gradients carry until the update (a loss scale: mixed.py)

    def __init__(self, params, lr: float):
        self.params = list(params)
        if len({id(p) for p in self.params}) != len(self.params):
            raise ValueError("a parameter appears more than once in params")
        if not lr >= 0.0:
            raise ValueError(f"lr must be >= 0, got {lr}")
        self.lr = float(lr)
        self.step_count = 0
        self.state: list[dict] = [{} for _ in self.params]
        self._work: dict = {}

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        self.step_count += 1
        for i, p in enumerate(self.params):
            if p.grad is not None:
                self._update(i, p)

    @abc.abstractmethod
    def _update(self, i: int, p) -> None:
        """Update parameter ``i`` (``p``, whose ``grad`` is set) in place."""

    def overflow(self) -> bool:
        """A step's gradient was not finite: whether that is a loss scale's overflow, forgiven
        (:class:`~.mixed.MixedPrecision`), rather than divergence. Here it never is."""
        return False

    def weights(self) -> list:
        """The arrays this rule moves, one per parameter: the parameters' own (a mixed-precision
        optimizer's fp32 masters). A strategy that moves weights outside the rule (elastic or
        model averaging) moves these, then calls :meth:`round_params`."""
        return [p.data for p in self.params]

    def round_params(self) -> None:
        """The parameters take :meth:`weights` after a move outside the rule: here they are
        the weights themselves."""
        return

    def rebind(self, params) -> Optimizer:
        """The same optimizer (class, hyperparameters, step count) over other parameters, with
        fresh state: ZeRO steps the shards that a rank owns with the optimizer it was given."""
        twin = copy.copy(self)
        Optimizer.__init__(twin, params, self.lr)
        twin.step_count = self.step_count
        return twin

    def zero_grad(self) -> None:
        """Drop every gradient (``p.grad = None``)."""
        for p in self.params:
            p.grad = None

    def _scratch(self, like, slot: int = 0):
        """A work array shaped like ``like``, reused across parameters and steps."""
        xp = get_array_module(like)
        key = (xp.__name__, like.dtype.str, slot)
        work = self._work.get(key)
        if work is None or work.size < like.size:
            work = self._work[key] = xp.empty(like.size, dtype=like.dtype)
        return work[: like.size].reshape(like.shape)

    def work_arrays(self) -> list:
        """The work arrays its updates reuse (the memory beside the state)."""
        return list(self._work.values())

    def state_dict(self) -> dict:
        """A flat copy of the state: ``"step_count"``, ``"lr"`` and ``"<name>.<index>"`` entries."""
        return {key: value.copy() if hasattr(value, "copy") else value
                for key, value in self.entries().items()}

    def entries(self) -> dict:
        """:meth:`state_dict`'s entries, its arrays the live ones (a checkpoint writes them as
        they are, with no copy of the state beside it)."""
        sd: dict = {"step_count": self.step_count, "lr": self.lr}
        for i, state in enumerate(self.state):
            sd.update({f"{name}.{i}": value for name, value in state.items()})
        return sd

    def load_state_dict(self, sd: dict) -> None:
        """Restore a :meth:`state_dict` exactly; validate all of it before changing anything."""
        for key in ("step_count", "lr"):
            if key not in sd:
                raise ValueError(f"optimizer state_dict is missing {key!r}")
        step_count = _integer("step_count", sd["step_count"])
        lr = float(_scalar("lr", sd["lr"]))
        loaded: list[dict] = [{} for _ in self.params]
        for key, value in sd.items():
            if key in ("step_count", "lr"):
                continue
            name, _, index = key.rpartition(".")
            if name not in self.buffers + self.counters or not index.isdigit():
                raise ValueError(f"unexpected key {key!r} in optimizer state_dict")
            i = int(index)
            if i >= len(self.params):
                raise ValueError(f"key {key!r}: there are only {len(self.params)} parameters")
            if name in self.counters:
                loaded[i][name] = _integer(key, value)
                continue
            shape = tuple(getattr(value, "shape", ()))
            if shape != self.params[i].data.shape:
                raise ValueError(
                    f"key {key!r}: shape {shape} does not match the parameter's "
                    f"{self.params[i].data.shape}"
                )
            loaded[i][name] = value
        for i, state in enumerate(loaded):
            for name in self.buffers + self.counters:
                if state.keys() - set(self.early) and name not in state:
                    raise ValueError(f"optimizer state_dict is missing '{name}.{i}'")
        for i, state in enumerate(loaded):
            self.state[i] = {
                name: self._restore(i, name, value) for name, value in state.items()
            }
        self.step_count = step_count
        self.lr = lr

    def state_dtype(self, dtype):
        """The dtype of the state kept for a parameter of ``dtype``: its own."""
        return dtype

    def _restore(self, i: int, name: str, value):
        """``value`` copied into parameter i's existing buffer ``name`` (or a new one)."""
        if name in self.counters:
            return value
        data = self.params[i].data
        xp = get_array_module(data)
        if xp is np:
            value = to_host(value)
        current = self.state[i].get(name)
        if current is None:
            return xp.array(value, dtype=self.state_dtype(data.dtype))
        current[...] = xp.asarray(value, dtype=current.dtype)
        return current


def _scalar(key: str, value):
    if np.ndim(value) != 0:
        raise ValueError(f"key {key!r}: expected a scalar, got shape {np.shape(value)}")
    return value


def _integer(key: str, value) -> int:
    value = _scalar(key, value)
    if int(value) != value or int(value) < 0:
        raise ValueError(f"key {key!r}: expected a non-negative integer, got {value!r}")
    return int(value)
