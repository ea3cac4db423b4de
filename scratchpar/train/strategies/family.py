"""What the command line knows of a family of strategies: its names, flags, rules and builder."""

from __future__ import annotations

import abc
from fractions import Fraction
from typing import NamedTuple

from ...comm.mesh import Mesh
from ...nn.recompute import chosen, recompute
from ..task import eval_rows


class Layout(NamedTuple):
    """How the busiest rank holds a training step's activations: one device's step on
    ``rows`` rows, ``stash`` times what a micro-batch keeps beyond what it holds once (a
    pipeline stage's micro-batches in flight over its chunks; 1 else), split over ``tp``
    tensor-parallel ranks. Exact numbers, so that absurd sizes stay Python ints."""

    rows: int
    stash: Fraction | int = 1
    tp: int = 1


class Family(abc.ABC):
    """A family of strategies (for example the parameter servers' four modes), as
    ``--strategy`` names it. A family declares:

    - ``names``: each ``--strategy`` name it answers to, with a line of help.
    - ``flags``: the frozen dataclass of the config fields it owns. Each field's ``owners``
      say which of its names it goes with, and the loop in ``validate.py`` refuses it elsewhere.
    - :meth:`problems`: every reason the strategy it runs cannot run on a world of ranks
      (asked of the running strategy's family only).
    - :meth:`mesh` and :meth:`build`: its mesh of the world, and its strategy for this rank
      from the config, the task, the optimizer factory and that mesh.
    - :meth:`describe`: that strategy's description (what a rank holds and sends) for a
      model's shape, which the memory estimate reads; :meth:`activations`, how its busiest
      rank keeps a step's activations for backward (its :class:`Layout`).

    It may refine where the base's defaults do not fit: the ranks that share each global
    batch (:meth:`workers`), a rank's dropout stream (:meth:`stream`), the checks that need
    the built task (:meth:`task_problems`) or this rank's node (:meth:`node_problems`), the
    layers it recomputes (:meth:`recompute`), and what rank 0 holds when it evaluates a model
    it gathered whole (:meth:`gathered`), what rank 0 gathers to save (:meth:`saved`), and
    whether a rank draws only its share of the model as it starts (:meth:`draws_parts`,
    :meth:`built`).
    """

    names: dict[str, str] = {}
    flags: type | None = None

    def problems(self, c, world_size: int) -> list[str]:
        """Every reason the run's flags cannot run on ``world_size`` ranks (none here)."""
        return []

    def mesh(self, cfg, comm):
        """The mesh the strategy runs on: pure data parallelism (``Mesh(comm)``) here."""
        return Mesh(comm)

    @abc.abstractmethod
    def build(self, cfg, task, make_optimizer, mesh):
        """The strategy ``cfg.train.strategy`` names, for this rank of ``mesh`` (``None`` for
        one device), training ``task`` (its objective) with optimizers from
        ``make_optimizer(params)``."""

    @abc.abstractmethod
    def describe(self, cfg, shape, world_size: int):
        """The :class:`~scratchpar.parallel.description.Description` of the strategy
        ``cfg.train.strategy`` names on ``world_size`` ranks, for a model of ``shape``."""

    def activations(self, cfg, world_size: int) -> Layout:
        """How the busiest rank holds its activations at its peak in training: here a step on
        its share of the batch, of the whole model."""
        return Layout(-(-cfg.train.batch_size // max(self.workers(cfg, world_size)
                                                      or world_size, 1)))

    def gathered(self, cfg, shape, world_size: int, description) -> int | None:
        """Parameter bytes rank 0 holds while it evaluates the model it gathered whole, or
        ``None`` where it trains on the whole model already."""
        return None

    def scored_rows(self, cfg, world_size: int) -> int:
        """The rows a rank scores at once in the held-out evaluation: a rank's share of the
        batch (``task.eval_rows``)."""
        return eval_rows(cfg, world_size)

    def draws_parts(self, cfg) -> bool:
        """Whether the strategy draws, of a model built under ``nn.deferred()``, only the
        blocks each rank holds (the command then builds it so); else every rank builds the
        whole model."""
        return False

    def built(self, cfg, shape, description) -> int:
        """Parameter bytes a rank holds as its strategy starts, beside the draw of one array:
        its own share where the family draws its parts, else the whole model."""
        return description.holds["parameters"] if self.draws_parts(cfg) else shape.bytes

    def saved(self, cfg, shape, world_size: int) -> int:
        """Bytes rank 0 holds beside its state while it saves a checkpoint: here the whole
        state, which the strategy gathers there (``Strategy.pieces``' default)."""
        return shape.k * shape.psi + shape.bytes

    def restored(self, description, files: int) -> int:
        """Bytes a rank reads at once to resume from a checkpoint of ``files`` bytes: here all
        of it, which the strategy reads whole (``Strategy.load_pieces``' default)."""
        return files

    def workers(self, c, world_size: int) -> int | None:
        """The ranks that share each global batch, or ``None`` where the family checks its
        batch itself (a pipeline's micro-batches)."""
        return world_size

    def computing(self, c, world_size: int) -> int:
        """The ranks that run forward and backward (not a server's or a master's): what
        throughput is shared among."""
        return world_size

    def stream(self, cfg, rank: int) -> int:
        """The dropout stream rank ``rank`` draws from: its own."""
        return rank

    def recompute(self, cfg, task) -> None:
        """The layers of the task's model that ``--recompute`` names keep only their inputs
        (:func:`~scratchpar.nn.recompute.chosen`), before the strategy wraps the model."""
        recompute(chosen(task.model, cfg.train.recompute))

    def task_problems(self, cfg, task) -> list[str]:
        """Reasons the built task does not fit the strategy (none here)."""
        return []

    def node_problems(self, cfg, world_size: int, on_node: int) -> list[str]:
        """Reasons this rank's node does not fit the strategy (``on_node`` ranks share it)."""
        return []


class OwnPieces(Family):
    """A family whose strategies save and resume only the pieces each rank holds (ZeRO's
    chunks, a stage's shards, a server's key range): rank 0 gathers nothing to save, and a
    rank reads its share, its parameters and optimizer state, whole before it changes any of
    them."""

    def saved(self, cfg, shape, world_size: int) -> int:
        return 0

    def restored(self, description, files: int) -> int:
        return min(files, description.holds["parameters"] + description.holds["optimizer"])
