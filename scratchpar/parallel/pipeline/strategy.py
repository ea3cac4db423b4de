"""Synchronous pipeline parallelism: any flushing schedule, one optimizer step per batch."""

from __future__ import annotations

from dataclasses import replace

from ...backend import get_array_module, to_device
from ...comm import collectives
from ...comm.buckets import Buckets
from ...comm.chunks import bounds
from ...data.shard import Part, shard
from ...nn.recompute import chosen
from ...nn.recompute import recompute as mark
from ...nn.unfilled import fill
from ...optim import guarded_step
from ..description import TOTALS, Description, Message, bucketed, replicated, stage_share
from ..pieces import Block
from ..strategy import Strategy
from . import schedules
from .actions import ScheduleError, chunks
from .partition import parameter_counts, partition
from .pieces import load_stage_pieces, stage_pieces
from .runtime import Runtime
from .scoring import score_forward
from .simulator import check
from .stage import StageModel
from .whole import load_whole_state, whole_state


class Pipeline(Strategy):
    """Stages over the mesh's pp axis and replicas over its dp axis (Huang et al. 2019, GPipe;
    Narayanan et al. 2021, PipeDream-Flush and interleaving): equal to one device. Splitting
    each stage over a tp axis too is :class:`~scratchpar.parallel.hybrid.Hybrid`.

    The replica's rows of the global batch (``shard`` over dp: all a stage reads, see
    :meth:`rows`) split into m micro-batches, each into (inputs, targets) by the objective's
    ``split``; the last stage scores its output with ``output_loss(out, targets, "sum")``.
    Every stage accumulates the gradients of the micro-batches' summed losses over the schedule.
    At ``STEP`` the gradient is what one device would have before dividing by the batch's units
    N. Then, in order:

    - replicas sum it over dp with DP's buckets;
    - the ranks holding a shared parameter (∩θᵢ ≠ ∅, a tied embedding) sum its gradient, so its
      copies stay bitwise equal (as Megatron-LM's embedding group does);
    - one all-reduce over the world sums the loss (held by the last stage), the squared
      gradient norm (each parameter counted once) and N (each replica's units, counted once);
    - every rank scales by 1/N, clips to the global norm and steps, or skips a non-finite step,
      alike.

    ``model`` is the whole single-device model, built alike on every rank. The strategy takes
    from it the layers of this rank's stage, ``ranges[c·p + rank]`` of its
    ``pipeline_layers()`` for each chunk c, and trains them in place: their parameters are
    :attr:`params`, and :attr:`model` is that stage (:class:`~.stage.StageModel`). It reads
    and changes none of the other layers; a caller short of memory frees them
    (:func:`~.stage.release`) or never draws them (``nn.deferred()``), as the command does;
    :meth:`gather_model` fills rank 0's ``model`` whole again. ``recompute="selective"``
    marks the model's attention cores.

    ``schedule`` is ``dict[stage, list[Action]]`` for this mesh's p (default: 1F1B over 2p
    micro-batches, the command's); ``ranges`` the layers of each of its p·v virtual stages
    (default: balanced by parameter count, :func:`~.partition.partition`).
    ``make_optimizer(params)`` builds this stage's optimizer. ``recompute="full"``
    re-materializes each chunk: it stashes only its input per micro-batch and runs its forward
    again in backward (Huang et al. 2019, GPipe §2.1); ``"selective"`` recomputes the
    attention cores alone (:func:`~scratchpar.nn.recompute.chosen`).
    """

    staged = True
    scores_in_layout = True
    draws_parts = True  # an unfilled model's stage is drawn here; the other stages never
    runtime_class = Runtime
    default_schedule = "1f1b"

    def __init__(self, model, make_optimizer, objective, mesh, /, *, schedule=None, ranges=None,
                 grad_clip: float = 0.0, bucket_bytes: int = 1 << 20, recompute: str = "none"):
        if schedule is None:
            schedule = schedules.build(self.default_schedule, mesh.pp,
                                       schedules.default_m(mesh.pp))
        check(schedule)  # every rank alike, before any message: a bad schedule never hangs
        if len(schedule) != mesh.pp:
            raise ScheduleError(f"the schedule has {len(schedule)} ranks, the mesh pp={mesh.pp}")
        super().__init__(model, None, objective, mesh, grad_clip=grad_clip)
        self.whole, self.schedule = model, schedule
        self.shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
        self.m = len({a.mb for a in schedule[0] if a.kind == "F"})
        if ranges is None:
            ranges = partition(parameter_counts(model.pipeline_layers()),
                               mesh.pp * chunks(schedule))
        held = self._held(model, ranges)
        order = {name: i for i, name in enumerate(self.shapes)}  # the whole model's places
        self.model = self.stage = StageModel(held, ranges, mesh.pp_comm.rank, mesh.pp, order)
        self.params = self.stage.params
        fill(self.params)  # an unfilled model's layers are drawn on the stages that hold them
        mark(self.stage.chunks if recompute == "full" else chosen(held, recompute))
        self._optimizer = make_optimizer(self.params)
        self.xp = get_array_module(*(p.data for p in self.params))
        self.runtime = self.runtime_class(self.stage, mesh.pp_comm.dup(name="pipeline"),
                                          self._output_loss(), self.tracer)
        self.actions = schedule[mesh.pp_comm.rank]
        self.sums = self._sums(bucket_bytes)  # (buckets, indices into params, communicator)
        self.tied = []  # (indices into params, communicator of the ranks sharing them)
        for group in self.stage.groups:  # every rank splits once per group, in the same order
            comm = mesh.pp_comm.split(int(mesh.pp_comm.rank in group), name=f"shared{group}")
            self.tied.append((self.stage.shared(group), comm))
        self.owned = self.stage.owned()  # the parameters this rank counts in the norm
        self.counts = mesh.pp_comm.rank == mesh.tp_comm.rank == mesh.cp_comm.rank == 0  # N: one
        # per replica

    @classmethod
    def describe(cls, shape, world: int, pp: int = 1, m: int = 1, v: int = 1,
                 rows: int = 0, bucket_bytes: int = 1 << 20, tp: int = 1,
                 cp: int = 1) -> Description:
        """The rank with the largest share of the layers (:func:`stage_share`, v chunks of
        them) holds its stage's parameters, gradient and optimizer state, and DP's buckets
        when replicated. Each step it sends and receives the boundary activation of each of
        the m micro-batches of its replica's ``rows`` (its 1/cp of their positions) and its
        gradient, whatever the ``schedule`` (Huang et al. 2019, GPipe §2.2), then the ranks
        holding its stage (dp × cp) sum its gradient in buckets (exposed, after the flush),
        and one all-reduce carries the loss, norm and N."""
        dp = max(world // (pp * tp * cp), 1)
        stage = replace(shape, psi=min(shape.psi, stage_share(shape, pp * v) * v),
                        count=-(-shape.count // pp), sizes=())  # its masters' and moments'
        # bytes kept; its arrays unknown
        micro = -(-rows // (dp * m)) * shape.boundary // cp  # one micro-batch's activation
        # every micro-batch crosses each of a rank's v chunks' boundaries once each way, as
        # every schedule has it; on one rank the crossings are hand-offs, not messages
        crossings = m * v if pp > 1 else 0
        messages = [Message("send", "pp", micro, crossings, "forward"),
                    Message("send", "pp", micro, crossings, "backward"),
                    Message("all-reduce", "world", TOTALS + 8, 1)]  # [Σ loss, Σ ‖g‖², N]
        if dp * cp > 1:
            messages.append(bucketed(stage, bucket_bytes, "all-reduce",
                                     "dp" if cp == 1 else "dp×cp"))
        return Description(replicated(stage, buffers=stage.bytes if dp * cp > 1 else 0),
                           tuple(messages), chunk=shape.largest, arrays=stage.stepped)

    def _held(self, model, ranges):
        """The model whose layers the stages run: the caller's own, on whole sequences."""
        if self.mesh.cp > 1:
            raise ValueError(f"{type(self).__name__} runs whole sequences: a mesh with cp > 1 "
                             "is Hybrid's")
        return model

    def _output_loss(self):
        """The loss of the last stage's output: the objective's ``output_loss``."""
        return self.objective.output_loss

    def rows(self, batch_size: int) -> tuple[int, int] | None:
        """The rows of this rank's replica, ``bounds(batch_size, dp)[its dp coordinate]``: the
        first stage reads their inputs, the last their targets, each stage their number. With
        one replica, all of them (``None``)."""
        if self.mesh.dp == 1:
            return None
        return bounds(batch_size, self.mesh.dp)[self.mesh.dp_comm.rank]

    def micro_batches(self, replica) -> list:
        """The m (inputs, targets) micro-batches of this replica's rows, the objective's
        ``split`` of each."""
        return [self.objective.split(shard(replica, i, self.m)) for i in range(self.m)]

    def _sums(self, bucket_bytes: int) -> list:
        """Which gradients sum over which ranks: every parameter over the ranks holding this
        stage's parameters (its dp replicas), in DP's buckets; none on one replica."""
        if self.mesh.replica_comm.size == 1:
            return []
        return [(Buckets([p.data for p in self.params], bucket_bytes), range(len(self.params)),
                 self.mesh.replica_comm)]

    def _sum_over_replicas(self) -> None:
        """Every parameter's gradient (zeros where backward did not reach it), contiguous, summed
        over the ranks holding it (its dp replicas, and under Hybrid their cp ranks, or the
        ranks holding the same experts) in DP's buckets (Li et al. 2020)."""
        for p in self.params:
            p.grad = (self.xp.zeros_like(p.data) if p.grad is None
                      else self.xp.ascontiguousarray(p.grad))
        for plan, indices, comm in self.sums:
            self._sum_in_buckets(plan, indices, comm)

    expert_ids: frozenset[int] = frozenset()  # parameters other replicas hold instead: none

    def _counted(self) -> list:
        """The parameters whose squared gradients this rank adds to the norm: after the sum
        every replica has them, so the first replica's own."""
        return self.owned if self.mesh.replica_comm.rank == 0 else []

    def _sum_partials(self) -> None:
        """Gradients that are parts of a sum over a tp group: none without one."""

    def _sum_in_buckets(self, plan, indices, comm) -> None:
        """The gradients of ``params[indices]`` summed over ``comm`` in ``plan``'s buckets."""
        plan.pack([self.params[i].grad for i in indices])
        for i, g in zip(indices, plan.finish(plan.start_all(comm))):
            self.params[i].grad = self.xp.ascontiguousarray(g)

    def close(self) -> None:
        """Collective: free the communicators this strategy made (not the mesh's)."""
        self.runtime.comm.free()
        for _, comm in self.tied:
            comm.free()

    def step(self, global_batch) -> dict:
        """One synchronous step on ``global_batch``, or on this replica's rows of it (a
        :class:`~scratchpar.data.shard.Part`, then ``"units"``: N, every replica's):
        ``{"loss", "grad_norm", "skipped"}``."""
        replica = shard(global_batch, self.mesh.dp_comm.rank, self.mesh.dp)
        self.units = self.objective.count(replica) if self.counts else 0
        self.optimizer.zero_grad()
        self.runtime.run(self.actions, self.micro_batches(replica), self._update)
        if isinstance(global_batch, Part):  # read after the guard's wait: no second one
            self.metrics["units"] = float(self.n)
        return self.metrics

    def _update(self, mb) -> None:
        """``STEP``: sum over replicas and shared copies, scale by 1/N, clip, step (see above)."""
        with self.tracer.region("optimizer", "compute"):
            self._sum_over_replicas()
            self._sum_partials()
            for indices, comm in self.tied:  # a shared parameter's copies sum their gradients
                for i in indices:
                    collectives.all_reduce_(comm, self.params[i].grad)
            totals = self.xp.zeros(3, "float64")  # [Σ loss, Σ ‖g‖², N] of this rank's part
            for loss in self.runtime.losses.values() if self.mesh.tp_comm.rank == 0 else ():
                totals[0] += loss.data
            for p in self._counted():
                totals[1] += (p.grad.astype("float64") ** 2).sum()
            totals[2] += self.units
            loss_sum, squares, self.n = collectives.all_reduce_(self.mesh.world, totals)
            scale = 1.0 / self.xp.maximum(self.n, 1.0)
            for p in self.params:
                p.grad *= scale
            self.metrics = guarded_step(self.optimizer, self.params, loss_sum * scale,
                                        self.grad_clip, norm=self.xp.sqrt(squares) * scale)

    # -- checkpoints: the whole model, under the single-device model's names ----------------------
    def state_dict(self) -> dict | None:
        """Collective over this replica: the whole model and optimizer state on rank 0 (keyed
        as one device keys them, :func:`~.whole.whole_state`); ``None`` elsewhere."""
        return whole_state(self)

    def _whole(self, flat: dict) -> dict | None:
        """This stage's flat state as whole tensors (a stage without tp holds them whole)."""
        return flat

    def _mine(self, flat: dict) -> dict:
        """This rank's part of the whole tensors of its stage: all of them without tp."""
        for name, p in zip(self.stage.names, self.params):
            shape = tuple(flat[f"model/{name}"].shape)
            if shape != p.shape:
                raise ValueError(f"{name}: shape {shape} does not give this rank's {p.shape}")
        return {k: to_device(v) if hasattr(v, "shape") else v for k, v in flat.items()}

    def load_state_dict(self, state: dict) -> None:
        """This rank's part of a whole-model checkpoint (:func:`~.whole.load_whole_state`)."""
        load_whole_state(self, state)

    def score(self, batch, task) -> tuple[float, float]:
        """The schedule's forward actions alone, in eval mode, on each replica's rows of
        ``batch``: the last stage scores every micro-batch (and counts what a classifier
        labels right), and one all-reduce over the world sums them: no rank gathers a stage."""
        return score_forward(self, batch, task)

    def pieces(self) -> tuple[list, dict]:
        """This rank's share of its stage (:func:`~.pieces.stage_pieces`)."""
        return stage_pieces(self)

    def load_pieces(self, stored) -> None:
        """This rank's stage, read from whichever blocks of a checkpoint hold it."""
        load_stage_pieces(self, stored)

    def box(self, i: int) -> Block:
        """The block of the whole array that parameter i of the stage is: all of it."""
        return Block.full(self.shapes[self.stage.names[i]])

    def split(self, i: int) -> bool:
        """Whether parameter i is cut over tp: no rank but this one holds its elements."""
        return False

    def gather_model(self) -> None:
        """Collective: rank 0's whole single-device model (the caller's ``model``) takes every
        stage's and shard's parameters back, to evaluate it; the other ranks' stay as they are."""
        state = self.state_dict()
        if state is not None:
            for name, param in self.whole.named_parameters():
                param.data = to_device(state["model"][name], dtype=param.dtype).copy()
