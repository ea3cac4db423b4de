"""The training-step protocol every strategy offers, and the set-up every strategy shares."""

from __future__ import annotations

import abc
import inspect

from ..trace.tracer import NULL

EXAMPLES = {"loss_fn": "def loss_fn(model, batch, reduction='mean'): x, y = batch; return "
                       "F.cross_entropy(model(x), y, reduction=reduction)",
            "criterion": "def criterion(out, y, reduction='mean'): return "
                         "F.cross_entropy(out, y, reduction=reduction)"}


def require_reduction(fn, what: str = "loss_fn") -> None:
    """Refuse, in words, a loss function that cannot be called with two arguments and
    ``reduction="sum"`` (a strategy that sums each rank's loss needs it): a ``loss_fn(model,
    batch)`` or a pipeline's ``criterion(out, targets)``. Where Python cannot tell (a
    builtin), accept it."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None, None, reduction="sum")
    except TypeError:
        raise TypeError(
            f"{what} {getattr(fn, '__name__', fn)!r} must take reduction= ('mean' or "
            "'sum'): each rank sums the loss of its part of the batch (reduction='sum') "
            "and the strategy divides by the units over every rank. For example: "
            f"{EXAMPLES[what]}") from None


class Strategy(abc.ABC):
    """A way to train one single-device ``model`` with its ``optimizer`` over the ranks of
    ``comm``. The training loop, checkpoints and metrics use only this protocol:

    - :meth:`step` (``batch -> {"loss", "grad_norm", "skipped", …}``): one training step on
      the global batch, which every rank holds. ``optimizer.lr`` is set before it.
    - :meth:`rows`: the rows of each global batch this rank reads. A strategy that names them
      is handed only those (a :class:`~scratchpar.data.shard.Part`) and returns the step's
      units over every rank in its metrics, ``"units"``: the loop cannot count a batch it did
      not draw.
    - :meth:`state_dict` / :meth:`load_state_dict`: the run's state in the single-device
      model's names (layout-free, so any strategy resumes it). Collectives.
    - :meth:`finish` after the last step of the run, :meth:`shutdown` when the loop ends,
      :meth:`gather_model` before the held-out evaluation of ``model`` on rank 0, and
      :meth:`close` to free what the strategy took from MPI: collectives, in that order.
    - ``lockstep``: whether every rank judges each step alike (the strategies that reduce the
      loss and the gradient). Where not, a rank whose steps diverge ends the job itself.
    - :meth:`describe`, a class method: what a rank holds and sends each step, for a model's
      :class:`~scratchpar.parallel.description.Shape`, without building anything.

    ``loss_fn(model, batch, reduction)`` scores a batch, ``count_fn(batch)`` counts its units
    (tokens or samples), ``grad_clip`` is the global gradient norm to clip to (0: off).
    """

    lockstep = True

    def __init__(self, model, optimizer, loss_fn, count_fn=None, comm=None,
                 grad_clip: float = 0.0):
        self.model, self.optimizer, self.loss_fn, self.count_fn = \
            model, optimizer, loss_fn, count_fn
        self.comm, self.grad_clip = comm, grad_clip
        self.params = model.parameters()

    @property
    def tracer(self):
        """The communicator's tracer (its collectives are recorded too), or a no-op one."""
        return getattr(self.comm, "tracer", None) or NULL

    @classmethod
    @abc.abstractmethod
    def describe(cls, shape, world: int, **knobs):
        """The :class:`~scratchpar.parallel.description.Description` of this strategy on
        ``world`` ranks for a model of ``shape``; ``knobs`` are the constructor's own."""

    @abc.abstractmethod
    def step(self, batch) -> dict:
        """One optimizer step on the global ``batch``: ``{"loss", "grad_norm", "skipped"}``."""

    def rows(self, batch_size: int) -> tuple[int, int] | None:
        """``(start, stop)``, the rows of a global batch of ``batch_size`` this rank reads;
        ``None``: it is handed the whole batch."""
        return None

    def state_dict(self) -> dict | None:
        """The whole model and optimizer state (one device's form): every replica holds it."""
        return {"model": self.model.state_dict(), "optim": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optim"])

    def finish(self) -> None:
        """After the run's last step: nothing to settle."""

    def shutdown(self) -> dict | None:
        """When the loop ends; a strategy with a protocol to end returns its report."""
        return None

    def gather_model(self) -> None:
        """Before the held-out evaluation: ``model`` is whole on rank 0 already."""

    def close(self) -> None:
        """Free the communicators and windows the strategy made: none."""
