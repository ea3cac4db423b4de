"""The training-step protocol every strategy offers, and the set-up every strategy shares."""

from __future__ import annotations

import abc

from ..backend import get_array_module
from ..nn.unfilled import fill
from ..trace.tracer import NULL
from .context.loss import context_loss
from .objective import require
from .pieces import whole_pieces
from .probe import Probes


def whole_model(mesh, name: str, sequences: bool = False):
    """The communicator of a strategy that gives every rank the whole model (data parallelism
    and its asynchronous kin): the mesh's world, which must be pure data parallelism, or where
    the strategy splits ``sequences`` too, data × context parallelism."""
    if mesh.pp != 1 or mesh.tp != 1 or (mesh.cp != 1 and not sequences):
        raise ValueError(f"{name} gives every rank the whole model: its mesh is pure data "
                         f"parallelism, Mesh(comm){', or dp × cp' if sequences else ''}; got "
                         f"{mesh!r} (Hybrid splits a model over pp, tp and cp)")
    return mesh.world


class Strategy(abc.ABC):
    """A way to train one single-device ``model`` over the ranks of a mesh. Every strategy is
    built one way::

        Strategy(model, make_optimizer, objective, mesh, /, *, grad_clip=0.0, …knobs)

    - ``model``: a single-device model. :attr:`model` is the model the strategy trains: the
      same, or the part of it this rank holds (a stage, a shard), as the strategy says. A
      model built under ``nn.deferred()`` is drawn as the strategy starts: whole, or where
      :attr:`draws_parts`, only the blocks this rank holds (:mod:`~scratchpar.nn.unfilled`).
    - ``make_optimizer(parameters)`` builds the optimizer over what this rank updates (its
      stage's, its shard's, its key range's); :attr:`optimizer` is that optimizer, read-only.
    - ``objective``: :class:`~scratchpar.parallel.objective.Objective`, the batch's summed
      loss and its units.
    - ``mesh``: a :class:`~scratchpar.comm.mesh.Mesh`; ``Mesh(comm)`` is pure data
      parallelism. Its maker frees it; the strategy frees what it makes (:meth:`close`).
    - ``grad_clip``, the global gradient norm to clip to (0: off), and every knob are
      keyword-only.

    The training loop, checkpoints and metrics use only this protocol:

    - :meth:`step` (``batch -> {"loss", "grad_norm", "skipped", …}``): one training step on
      the global batch, which every rank holds. ``optimizer.lr`` is set before it.
    - :meth:`rows`: the rows of each global batch this rank reads. A strategy that names them
      is handed only those (a :class:`~scratchpar.data.shard.Part`) and returns the step's
      units over every rank in its metrics, ``"units"``: the loop cannot count a batch it did
      not draw.
    - :meth:`state_dict` / :meth:`load_state_dict`: the run's state in the single-device
      model's names (layout-free, so any strategy resumes it). Collectives.
    - :meth:`pieces` / :meth:`load_pieces`: the same state as the blocks each rank holds, for
      a checkpoint that no rank holds whole.
    - :meth:`finish` after the last step of the run, :meth:`shutdown` when the loop ends,
      then the held-out evaluation: where :attr:`scores_in_layout`, the strategy's
      ``score(batch, task)`` on every rank in the training layout (the global batch's summed
      loss and the samples a classifier labels right, the same on every rank), else
      :meth:`gather_model` and ``model`` on rank 0; and
      :meth:`close` to free what the strategy took from MPI: collectives, in that order.
    - ``lockstep``: whether every rank judges each step alike (the strategies that reduce the
      loss and the gradient). Where not, a rank whose steps diverge ends the job itself.
    - :meth:`describe`, a class method: what a rank holds and sends each step, for a model's
      :class:`~scratchpar.parallel.description.Shape`, without building anything.

    A measurement is no knob: :meth:`attach` adds a :class:`~scratchpar.parallel.probe.Probe`,
    which hears the ``moments`` the step names.
    """

    lockstep = True
    scores_in_layout = False  # whether it has a score() that evaluates where the model trains
    # (else rank 0 evaluates the whole model, after gather_model())
    moments: frozenset = frozenset()  # the probe moments this strategy's step names (probe.py)
    staged = False  # whether the objective must say how to split a batch (a pipeline's)
    draws_parts = False  # whether it draws an unfilled model's blocks itself (else: whole)
    context = None  # a whole-model strategy's cp group and layout, where it splits sequences

    def __init__(self, model, make_optimizer, objective, mesh, /, *, grad_clip: float = 0.0):
        require(objective, self.staged)
        self.model, self.objective, self.mesh, self.grad_clip = model, objective, mesh, grad_clip
        self.comm = None if mesh is None else mesh.world
        self.params = model.parameters()
        if not self.draws_parts:
            fill(self.params)
        self.probes = Probes(self.moments)
        self._optimizer = None if make_optimizer is None else make_optimizer(self.params)

    def attach(self, probe):
        """Attach a measurement from outside (a :class:`~scratchpar.parallel.probe.Probe`); it
        hears this strategy's moments from the next step on. Returns ``probe``."""
        return self.probes.add(probe, self)

    @property
    def optimizer(self):
        """The optimizer this rank steps, made by ``make_optimizer`` (the loop sets its rate)."""
        return self._optimizer

    def sum_loss(self, batch):
        """This rank's summed loss on ``batch`` (a Tensor) and its units; under context
        parallelism (a :attr:`context`), on this rank's positions of it
        (:func:`~.context.context_loss`)."""
        if self.context is not None:
            return context_loss(self.objective, self.model, batch, self.context)
        loss = self.objective.loss(self.model, batch, reduction="sum")
        return loss, self.objective.count(batch)

    def replay(self, replayed, batch):
        """A captured step, ``replayed`` (:class:`~scratchpar.kernels.graph.Replayed`), on
        ``batch``: its arrays the graph's inputs, and the loss scale, a number the graph's
        kernels hold, in its key, so that a new scale captures again."""
        scaler = getattr(self.objective, "scaler", None)
        return replayed(batch if isinstance(batch, tuple) else (batch,),
                        (None if scaler is None else scaler.scale,))

    def backward_mean(self, batch):
        """Backpropagate the summed loss on ``batch``, then divide every gradient by N, its
        units, as one device divides by its batch's: ∇L = ∇(Σ losses)/N. Returns Σ losses, N
        and 1/N, on the device (no wait for it here)."""
        loss, n = self.sum_loss(batch)
        loss.backward()
        xp = get_array_module(loss.data)
        units = (xp.full((), n, dtype="float64") if get_array_module(n) is not xp
                 else xp.asarray(n, dtype="float64"))  # a host count set on the device (a
        # fill, not a copy a captured step would keep), a device count cast
        scale = 1.0 / xp.maximum(units, 1.0)
        for p in self.params:
            if p.grad is not None:
                p.grad *= scale
        return loss.data, n, scale

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
        """Collective: the whole model and optimizer state in one device's form, on rank 0
        (every replica holds it); ``None`` on the others."""
        if self.comm is not None and self.comm.rank != 0:
            return None
        return {"model": self.model.state_dict(), "optim": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optim"])

    def pieces(self) -> tuple[list, dict]:
        """Collective: the pieces of the run's state this rank writes into a checkpoint
        (:class:`~scratchpar.parallel.pieces.Piece`, each a block of one array of
        :meth:`state_dict`'s) and its scalars by part. By default :meth:`state_dict`'s whole
        arrays, all on rank 0; a strategy that holds its state in parts writes each rank's."""
        state = self.state_dict()
        return whole_pieces(state) if state is not None else ([], {})

    def load_pieces(self, stored) -> None:
        """This rank's state from a checkpoint. ``stored`` reads any block of any array of the
        one-device state (``read(part, name, block)``, ``names(part)``, ``scalars(part)``,
        ``state()``; :class:`~scratchpar.train.stored.Stored`). By default the whole state,
        through :meth:`load_state_dict`; a strategy that holds its state in parts reads its
        own blocks."""
        self.load_state_dict(stored.state())

    def finish(self) -> None:
        """After the run's last step: nothing to settle."""

    def shutdown(self) -> dict | None:
        """When the loop ends; a strategy with a protocol to end returns its report."""
        return None

    def gather_model(self) -> None:
        """Before the held-out evaluation: ``model`` is whole on rank 0 already."""

    def routing(self) -> dict:
        """A sparse model's routing figures from its last forward (``nn.GPT.routing``), empty
        for a dense one; collective where the model is split over ranks."""
        return getattr(self.model, "routing", dict)()

    def close(self) -> None:
        """Free the communicators and windows the strategy made: none."""
