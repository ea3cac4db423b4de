"""Mixed-precision updates: 16-bit parameters stepped through fp32 master copies."""

from __future__ import annotations

from ..autograd.precision import WIDE
from ..backend import get_array_module
from .adam import Adam, launchable
from .optimizer import Optimizer
from .scaler import LossScaler


class Master:
    """A parameter's fp32 master copy and the fp32 gradient the inner rule reads."""

    __slots__ = ("data", "grad")

    def __init__(self, data, grad):
        self.data, self.grad = data, grad


class MixedPrecision(Optimizer):
    """``inner``'s rule applied to fp32 masters of 16-bit parameters (Micikevicius et al. 2018,
    §3.1): an update smaller than half a 16-bit ulp of the weight would be lost if added to the
    weight itself, so the weight is kept in fp32 beside it and rounded into the model after each
    step. A master is the parameter's first value widened, made at its first update, as its
    state is; the inner rule's state (moments) is fp32 beside it, in the same per-parameter
    dict, so ``state_dict`` holds ``master.<i>`` with the rest and ZeRO shards it alike.

    The gradient arrives in the parameters' dtype and, with a ``scaler``, S times its size
    (:class:`~.scaler.LossScaler`); each update widens it and divides by S in fp32. The guard
    (:func:`~.guard.guarded_step`) reads ``grad_scale`` to judge the true norm, and calls
    :meth:`overflow` on a non-finite one.
    """

    def __init__(self, inner: Optimizer, scaler: LossScaler | None = None):
        super().__init__(inner.params, inner.lr)
        self.inner, self.scaler = inner, scaler
        inner.state = self.state  # one dict per parameter: the master and the inner rule's state
        self.buffers = ("master",) + inner.buffers
        self.early = ("master",)  # made when a strategy first moves the weights (weights())
        self.counters = inner.counters

    @property
    def grad_scale(self) -> float:
        return 1.0 if self.scaler is None else self.scaler.scale

    def overflow(self) -> bool:
        """A non-finite gradient: whether the loss scale takes the blame (and is halved)."""
        return self.scaler is not None and self.scaler.overflowed()

    def step(self) -> None:
        self.inner.lr, self.inner.step_count = self.lr, self.step_count + 1
        live = [(i, p) for i, p in enumerate(self.params) if p.grad is not None]
        if isinstance(self.inner, Adam) and launchable([(p.data, p.grad) for _, p in live], "e"):
            self.step_count += 1  # every update, its unscaling and rounding in one launch
            self.inner.step_many([(i, p.data, p.grad, self._master(i, p)) for i, p in live],
                                 unscale=1.0 / self.grad_scale)
        else:
            super().step()
        if self.scaler is not None:
            self.scaler.applied()

    def weights(self) -> list:
        """Every parameter's fp32 master, made now where its first update has not come yet."""
        return [self._master(i, p) for i, p in enumerate(self.params)]

    def round_params(self) -> None:
        """Each parameter takes its master, rounded to its 16 bits."""
        for state, p in zip(self.state, self.params):
            if "master" in state:
                get_array_module(p.data).copyto(p.data, state["master"], casting="unsafe")

    def _master(self, i: int, p):
        """Parameter i's master: the parameter's value widened, at the first call."""
        state = self.state[i]
        if "master" not in state:
            state["master"] = p.data.astype(WIDE)
        return state["master"]

    def _update(self, i: int, p) -> None:
        master = self._master(i, p)
        xp = get_array_module(master)
        grad = self._scratch(master)  # fp32
        xp.multiply(p.grad, 1.0 / self.grad_scale, out=grad, dtype=WIDE)  # ∇ = (S·∇) / S
        self.inner._update(i, Master(master, grad))
        xp.copyto(p.data, master, casting="unsafe")  # rounded to the parameter's 16 bits

    def state_dtype(self, dtype):
        """fp32: the masters and the inner rule's moments."""
        return WIDE

    def rebind(self, params) -> MixedPrecision:
        """The same rule and scaler over other parameters (ZeRO's shards), with fresh masters."""
        twin = MixedPrecision(self.inner.rebind(params), self.scaler)
        twin.step_count = self.step_count
        return twin


def rule_and_scaler(optimizer) -> tuple:
    """For parameters that are their own fp32 masters (a parameter server's range): the rule a
    :class:`MixedPrecision` wraps and the loss scaler it divides by, or ``optimizer`` and
    None."""
    if isinstance(optimizer, MixedPrecision):
        return optimizer.inner, optimizer.scaler
    return optimizer, None
