"""The parameter servers' messages: tags on the strategy's own dup of the world, the header a
worker sends with every step, and how the pushes of one clock weigh into one update."""

from __future__ import annotations

from dataclasses import astuple, dataclass

import numpy as np

HEADER, PUSH, PULL, METRICS, STATS = 1, 2, 3, 4, 5  # tags
STEP, ACQUIRE, LEAVE = 0, 1, 2  # header kinds


@dataclass
class Header:
    """What a worker tells each server, as 10 float64s (one small buffer message, tag HEADER):

    - ``STEP``: worker step ``clock`` is done over ``units`` units at rate ``lr``, its loss
      ``mean`` over them (NaN where its loss or gradient was not finite: the step is not in
      any push). A gradient range follows (tag PUSH) if ``grad``, of norm ``norm`` over the
      whole model. It wants the parameters back (tag PULL) before its next step if ``pull``.
      With ``overflow`` its 16-bit gradient overflowed and its loss scale was halved.
    - ``ACQUIRE``: it asks for the lock (locked mode); the grant is the parameters (tag PULL).
    - ``LEAVE``: it is done after ``clock`` steps and ``pushes`` pushes, a residual push of
      the steps since its last one (Downpour's n_push) following if ``grad``.
    """

    kind: int
    clock: int = 0
    mean: float = 0.0
    units: float = 0.0
    lr: float = 0.0
    norm: float = 0.0
    grad: bool = False
    pull: bool = False
    pushes: int = 0
    overflow: bool = False

    def pack(self) -> np.ndarray:
        return np.array(astuple(self), dtype=np.float64)  # (10,)

    @classmethod
    def unpack(cls, buf: np.ndarray) -> Header:
        kind, clock, mean, units, lr, norm, grad, pull, pushes, overflow = buf.tolist()
        return cls(int(kind), int(clock), mean, units, lr, norm, bool(grad), bool(pull),
                   int(pushes), bool(overflow))

    @staticmethod
    def buffer() -> np.ndarray:
        return np.empty(10, dtype=np.float64)


class ProtocolError(RuntimeError):
    """A worker's message broke the protocol (a clock out of order, a lost update)."""


def weighted_mean(grads: list, means: list[float], units: list[float]):
    """One update from the pushes of one clock, in worker order: Σ_w (n_w/N)·g_w and the loss
    Σ_w (n_w/N)·L_w, with N = Σ n_w, each g_w the mean gradient over worker w's n_w units. This
    is one device's mean gradient over the global batch (and with one worker, g itself,
    bitwise: (n/n)·g = g)."""
    units = [float(n) for n in units]  # Python floats: a float32 gradient stays float32
    total = sum(units)
    weights = [n / total if total else 0.0 for n in units]
    grad = sum(w * g for w, g in zip(weights, grads))  # (K_s,)
    return grad, sum(w * m for w, m in zip(weights, means))
