"""Hybrid dp × pp × cp × tp: pipeline stages whose layers are split over a tensor-parallel
group, and whose sequences are split over a context-parallel one."""

from __future__ import annotations

import functools
from dataclasses import replace

from ..backend import to_device
from ..comm.buckets import Buckets
from ..comm.states import gather_states
from ..nn.moe import MixtureOfExperts, figures
from ..optim.scaler import scaled
from .context import Context, ContextError, context_parallel, traffic
from .context.loss import columns
from .description import Description, Message
from .experts import expert_parameters, experts_over
from .experts.traffic import traffic as expert_traffic
from .pieces import Block
from .pipeline.actions import ScheduleError
from .pipeline.strategy import Pipeline
from .tensor import shard as tensor_shard
from .tensor import tensor_parallel
from .tensor.layout import PARTIAL, Split, layouts


class Hybrid(Pipeline):
    """The mesh's four axes at once (Narayanan et al. 2021, §2.3, the PTD-P layout): replicas
    over dp, stages over pp, and each stage's matrices split over tp (Shoeybi et al. 2019),
    its sequence too with ``sequence_parallel`` (Korthikanti et al. 2022), and a GPT's
    sequences over cp, each rank of a cp group running its positions of them (Dubey et al.
    2024, §3.3.2): equal to one device.

    ``model`` is the whole single-device model (a GPT or an MLP). The strategy takes from it
    its weights, copied into this rank's tp shard
    (:func:`~scratchpar.parallel.tensor.tensor_parallel`), and its dropout stream, which the
    shard draws from; it trains the shard's stage (:attr:`model`, :attr:`params`) and leaves
    ``model`` as it was, but for :meth:`gather_model`, which fills rank 0's whole. A caller
    short of memory frees ``model``'s weights meanwhile (:func:`~.pipeline.stage.release`, as
    the command does). ``ranges`` cut the whole model's layers, alike on every tp rank.

    The shard's layouts say which parameters are split. A split parameter's gradient is exact
    on its rank, a replicated one's is whole and equal on every rank of the tp group, and a
    ``PARTIAL`` one's (sequence-parallel LayerNorms) is summed over tp. So tp rank 0 counts
    the replicated parameters in the norm, and the loss that every tp rank computed alike,
    once. Every rank counts its split ones.

    Under cp > 1 each rank of a cp group reads its ``layout``'s positions of every sequence
    (:class:`~scratchpar.parallel.context.Context`), and its blocks attend by ``attention``
    (``"ring"``, ``"allgather"`` or ``"ulysses"``,
    :func:`~scratchpar.parallel.context.context_parallel`). The parameters are replicated over
    cp, so their gradients sum over dp × cp (the mesh's ``replica_comm``); each cp rank's loss
    is its own tokens'. The rest is :class:`~scratchpar.parallel.pipeline.Pipeline`'s.
    """

    def __init__(self, model, make_optimizer, objective, mesh, /, *, schedule=None, ranges=None,
                 sequence_parallel: bool = False, attention: str = "ring",
                 layout: str = "zigzag", capacity: str = "global", grad_clip: float = 0.0,
                 bucket_bytes: int = 1 << 20, recompute: str = "none"):
        self.sequence_parallel = sequence_parallel
        self.attention, self._layout, self.context = attention, layout, None
        self.capacity, self.experts = capacity, None
        super().__init__(model, make_optimizer, objective, mesh, schedule=schedule,
                         ranges=ranges, grad_clip=grad_clip, bucket_bytes=bucket_bytes,
                         recompute=recompute)
        by_name = layouts(self.shard)
        self.layouts = [by_name[name] for name in self.stage.names]
        split = {id(p) for p, lay in zip(self.params, self.layouts) if isinstance(lay, Split)}
        self.owned = [p for p in self.owned if mesh.tp_comm.rank == 0 or id(p) in split]
        self.partial = [i for i, lay in enumerate(self.layouts) if lay == PARTIAL]
        self.partial_plan = (Buckets([self.params[i].data for i in self.partial], bucket_bytes)
                             if self.partial and mesh.tp > 1 else None)

    def _held(self, model, ranges):
        """This rank's tp shard of ``model``, whose layers the stages run."""
        spans = [(r.start, r.stop) for r in ranges]
        if len({tuple(s) for s in self.mesh.tp_comm.allgather_obj(spans, "stage layers")}) > 1:
            raise ScheduleError("the tp ranks of a stage were given different layers: partition "
                                "the whole model's layers, alike on every rank")
        self.shard = tensor_parallel(model, self.mesh.tp_comm, self.sequence_parallel)
        if self.mesh.cp > 1:
            if not hasattr(self.shard, "blocks"):
                raise ContextError("context parallelism splits a sequence: the model must be a "
                                   f"GPT, not a {type(model).__name__}")
            self.context = Context(self.mesh.cp_comm.dup(name="context"), self._layout)
            context_parallel(self.shard, self.context, self.attention)
        self.experts = experts_over(self.shard, self.mesh, self.context, self.capacity)
        return self.shard

    def _sums(self, bucket_bytes: int) -> list:
        """Under ep > 1 the experts' gradients sum over the ranks holding the same experts
        (``edp_comm``), the rest over the replicas; else all over the replicas."""
        if self.mesh.ep == 1:
            return super()._sums(bucket_bytes)
        ids, sums = self.expert_ids, []
        for comm, wanted in ((self.mesh.replica_comm, False), (self.mesh.edp_comm, True)):
            indices = [i for i, p in enumerate(self.params) if (id(p) in ids) == wanted]
            if comm.size > 1 and indices:
                sums.append((Buckets([self.params[i].data for i in indices], bucket_bytes),
                             indices, comm))
        return sums

    @functools.cached_property
    def expert_ids(self) -> frozenset[int]:
        """The ids of this rank's experts' parameters under ep > 1 (none else: at ep = 1 every
        replica holds every expert); the shard's experts are cut once, as it is built."""
        return frozenset(expert_parameters(self.shard) if self.mesh.ep > 1 else ())

    @functools.cached_property
    def sparse(self) -> bool:
        """Whether the whole model has a sparse layer (on any stage)."""
        return any(isinstance(m, MixtureOfExperts) for _, m in self.whole.named_modules())

    def _counted(self) -> list:
        """Each parameter once in the norm: a dense one by the first replica, an expert's by
        the first of the ranks holding that expert."""
        if self.mesh.ep == 1:
            return super()._counted()
        ids = self.expert_ids
        first = {True: self.mesh.edp_comm.rank == 0, False: self.mesh.replica_comm.rank == 0}
        return [p for p in self.owned if first[id(p) in ids]]

    def micro_batches(self, replica) -> list:
        """The pipeline's micro-batches, under cp each cut to this rank's positions: the
        inputs' and the targets' columns ``context.mine(T)``."""
        micro = super().micro_batches(replica)
        if self.context is None:
            return micro
        return [columns(x, y, self.context) for x, y in micro]

    def routing(self) -> dict:
        """Collective over the stages: the last micro-batch's routing figures of every stage's
        sparse layers, each layer's those of the micro-batch over every replica."""
        if not self.sparse:
            return {}
        mine = [m.stats for chunk in self.stage.chunks for _, m in chunk.named_modules()
                if isinstance(m, MixtureOfExperts)]
        return figures(sum(self.mesh.pp_comm.allgather_obj(mine, "routing figures"), []))

    def close(self) -> None:
        """Collective: free the communicators this strategy made (not the mesh's)."""
        super().close()
        if self.context is not None:
            self.context.comm.free()
        if self.experts is not None:
            self.experts.free()

    @classmethod
    def describe(cls, shape, world: int, pp: int = 1, m: int = 1, v: int = 1,
                 rows: int = 0, bucket_bytes: int = 1 << 20,
                 tp: int = 1, sequence_parallel: bool = False, cp: int = 1,
                 attention: str = "ring", ep: int = 1, sparse: tuple[int, int, int] = (0, 0, 1),
                 per_group: int = 1):
        """The pipeline's figures with each stage's model states split t ways (Megatron splits
        every matrix; the LayerNorms and the row-parallel biases, replicated, are a few C per
        layer and left out). Per layer of the stage and micro-batch, tp adds Megatron's two
        all-reduces of the activation forward and two backward (Shoeybi et al. 2019, §3). With
        sequence parallelism it adds an all-gather and a reduce-scatter for each instead
        (Korthikanti et al. 2022, §4.2), and the pipeline messages carry 1/t of the sequence.
        The replicas all-reduce each rank's shard of its stage's gradient, 1/t of it. Under cp
        each rank holds 1/cp of every sequence, and its attention moves its heads' keys and
        values (:func:`~scratchpar.parallel.context.traffic`), one for each ``per_group``
        query heads. ``sparse`` = (sparse layers, their
        experts' parameters, k) of a sparse model: tp does not split the experts, ep does, and
        each sparse layer trades its tokens over ep (:func:`~.experts.traffic.traffic`); the
        experts' gradients are counted in the replicas' all-reduce, an upper bound."""
        base = Pipeline.describe(shape, world, pp, m, v, rows, bucket_bytes, tp, cp)
        layers_sparse, expert_params, k = sparse
        share = expert_params / max(shape.psi, 1)  # the experts' part of every state
        held = {part: round(size * share) for part, size in base.holds.items()}  # experts'
        holds = {part: -(-(size - held[part]) // tp) + -(-held[part] // ep)
                 for part, size in base.holds.items()}
        dp = max(world // (pp * tp * cp), 1)
        micro = -(-rows // (dp * m)) * shape.boundary // cp  # this rank's positions
        layers = -(-shape.depth // pp) * m
        ops = ("all-gather", "reduce-scatter") if sequence_parallel else ("all-reduce",)
        tensor = tuple(Message(op, "tp", micro, 2 * layers, phase)
                       for phase in ("forward", "backward") for op in ops)
        piped = tuple(replace(msg, nbytes=-(-msg.nbytes // tp))
                      if (msg.axis == "pp" and sequence_parallel) or msg.axis.startswith("dp")
                      else msg for msg in base.sends)  # the replicas reduce a shard of the stage
        context = (traffic(attention, cp, -(-micro // tp), layers, shape.itemsize, per_group)
                   if cp > 1 else ())
        experts = (expert_traffic(k, micro, -(-layers_sparse // pp) * m)
                   if ep > 1 and layers_sparse else ())
        return Description(holds, piped + tensor + context + experts, chunk=base.chunk,
                           arrays=base.arrays)

    def _output_loss(self):
        """A GPT's shard scores its vocabulary-split logits itself (the vocabulary-parallel
        loss): the objective's ``output_loss`` takes whole logits, which no rank forms. It
        carries into backward the loss scale that this stage's optimizer divides out (fp16's
        :class:`~scratchpar.optim.mixed.MixedPrecision`), as the objective's own losses do.
        An MLP's shard gathers its logits whole, for the objective's ``output_loss``."""
        own = getattr(self.shard, "output_loss", None)
        if own is None:
            return self.objective.output_loss
        scaler = getattr(self.optimizer, "scaler", None)
        return lambda *args, **kwargs: scaled(own(*args, **kwargs), scaler)

    def _sum_partials(self) -> None:
        """The sequence-parallel replicated parameters' gradients, one part per sequence
        shard, summed over the tp group (Korthikanti et al. 2022, §4.2.2)."""
        if self.partial_plan is not None:
            self._sum_in_buckets(self.partial_plan, self.partial, self.mesh.tp_comm)

    def box(self, i: int) -> Block:
        """The block of the whole array that parameter i of this rank's shard is: its box of
        the view its split names (rank t's ``bounds(n, T)[t]`` along the split axis), or all
        of a replicated one."""
        whole, lay = self.shapes[self.stage.names[i]], self.layouts[i]
        if not isinstance(lay, Split):
            return Block.full(whole)
        return lay.block(whole, self.mesh.tp_comm.rank, self.mesh.tp)

    def split(self, i: int) -> bool:
        return isinstance(self.layouts[i], Split)

    def _whole(self, flat: dict) -> dict | None:
        """The tp shards of this stage joined into whole tensors, on tp rank 0."""
        if self.mesh.tp == 1:
            return flat
        parts = gather_states(self.mesh.tp_comm, flat, self.xp, "tensor-parallel shards")
        return None if parts is None else tensor_shard.join(parts, self._layout_of(flat))

    def _mine(self, flat: dict) -> dict:
        """This rank's tp shard of its stage's whole tensors."""
        tp = self.mesh.tp_comm
        for name, p, lay in zip(self.stage.names, self.params, self.layouts):
            shape = tuple(flat[f"model/{name}"].shape)
            want = lay.shard_shape(shape, tp.rank, tp.size) if isinstance(lay, Split) else shape
            if want != p.shape:
                raise ValueError(f"{name}: shape {shape} does not give this rank's {p.shape}")
        return tensor_shard.take({k: to_device(v) if hasattr(v, "shape") else v
                                  for k, v in flat.items()}, self._layout_of(flat),
                                 tp.rank, tp.size)

    def _layout_of(self, flat: dict) -> dict:
        """The layout of each key of a flat state: its parameter's, for the parameter and for
        optimizer state shaped like it (scalars and counters are replicated, as are the
        experts that other ranks of an ep group joined in: tp does not split them)."""
        by_name = dict(zip(self.stage.names, self.layouts))
        by_index = dict(zip(self.stage.index, self.layouts))
        out = {}
        for key in flat:
            section, _, rest = key.partition("/")
            name, _, i = rest.rpartition(".")
            out[key] = (by_name.get(rest) if section == "model" else
                        by_index.get(int(i)) if name and hasattr(flat[key], "shape") else None)
        return out
