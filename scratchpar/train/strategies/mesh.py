"""Pipelines and the hybrid dp × pp × cp × tp mesh on the command line: flags, rules, builder."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ...comm.mesh import Mesh, draw
from ...nn.unfilled import fill
from ...parallel import Hybrid, PipeDream, Pipeline
from ...parallel.pipeline import partition, schedules
from ...parallel.pipeline.partition import describe, layer_names, layer_times, parameter_counts
from ...parallel.pipeline.stage import release
from ..experts import ep_problems, expert_layout, experts_shape
from ..option import count, opt
from .family import Layout, OwnPieces
from .schedule_flags import built, costs_of, peak_stash, schedule_problems
from .splits import LAYOUTS, SCHEMES, TENSOR_MODELS, context_problems, tensor_problems

HYBRID, MESH = ("hybrid",), ("pipeline", "hybrid")
CONTEXT = ("hybrid", "zero")  # the strategies that split a GPT's sequences over cp
UNLAYERED_MODELS = ("logreg", "factors")  # one lookup and a sum: nothing to split into stages


@dataclass(frozen=True)
class MeshFlags:
    tp: int = opt(1, "hybrid: tensor-parallel ranks per stage (Megatron)", flag="--tp",
                  owners=HYBRID)
    sequence_parallel: bool = opt(False, "hybrid, gpt: LayerNorm and dropout on sequence "
                                         "shards, all-gather and reduce-scatter in place of "
                                         "the all-reduces (Korthikanti et al. 2022)",
                                  owners=HYBRID)
    cp: int = opt(1, "hybrid, zero, gpt: context-parallel ranks per replica, each holding "
                     "1/cp of every sequence's positions", flag="--cp", owners=CONTEXT)
    cp_attention: str = opt("ring", "--cp: attention over the sequence's shards: K, V around a "
                            "ring (Liu et al. 2023), all-gathered (Llama 3), or heads by "
                            "all-to-all (DeepSpeed-Ulysses)", choices=SCHEMES, owners=CONTEXT)
    cp_layout: str = opt("zigzag", "--cp: the positions each cp rank holds: chunks r and "
                         "2·cp−1−r (balanced causal work), or one contiguous run",
                         choices=LAYOUTS, owners=CONTEXT)
    ep: int = opt(1, "hybrid, --experts: expert-parallel ranks, folded onto the dp × cp "
                     "ranks, each holding E/ep of every sparse layer's experts", flag="--ep",
                  owners=HYBRID)
    capacity_scope: str = opt("global", "--experts: count each expert's capacity over the "
                              "micro-batch, dropping as one device (global), or over each "
                              "rank's tokens (rank: Megatron's and DeepSpeed's)",
                              choices=("global", "rank"), owners=HYBRID)
    pp: int = opt(1, "pipeline, hybrid: stages", flag="--pp", owners=MESH)
    dp: int | None = opt(None, "pipeline, hybrid: replicas of the pipeline (default: the world "
                               "size over --pp × --cp × --tp)", flag="--dp", kind=int,
                               owners=MESH)
    pp_schedule: str = opt("1f1b", "pipeline: naive model distribution (one micro-batch), "
                           "GPipe, 1F1B (PipeDream-Flush), interleaved 1F1B, backward-"
                           "prioritized, zero-bubble ZB-H1 (weight gradients apart), or "
                           "PipeDream (asynchronous, weights stashed)",
                           choices=("naive", "gpipe", "1f1b", "interleaved", "bprio", "zb-h1",
                                    "pipedream"), owners=MESH)
    microbatches: int | None = opt(None, "pipeline: micro-batches per replica's batch "
                                         "(default: 1 for naive or one stage, else twice "
                                         "--pp)", kind=int, owners=MESH)
    virtual: int = opt(1, "pipeline, interleaved: model chunks per rank", owners=MESH)
    balance: str = opt("params", "pipeline: balance the stages by parameter count or by "
                                 "measured time", choices=("params", "time"), owners=MESH)
    pp_costs: str = opt("1:2:1", "pipeline, bprio and zb-h1: forward : backward : weight "
                                 "gradient, the costs their order is planned with (backward "
                                 "includes the weight gradient)", owners=MESH)

    @property
    def m(self) -> int:
        """Micro-batches per replica's batch (``--microbatches`` or its default)."""
        if self.microbatches is not None:
            return self.microbatches
        return 1 if self.pp_schedule == "naive" else schedules.default_m(self.pp)

    @property
    def costs(self) -> tuple[float, ...]:
        """``--pp-costs`` as numbers (checked by ``schedule_problems``)."""
        return costs_of(self.pp_costs)

    def replicas(self, world_size: int) -> int:
        """Pipeline replicas on ``world_size`` ranks: ``--dp``, or the world over ``--pp``
        × ``--cp`` × ``--tp``."""
        return self.dp if self.dp is not None else world_size // self.replica_ranks

    @property
    def replica_ranks(self) -> int:
        """The ranks of one replica of the pipeline: pp × cp × tp."""
        return self.pp * self.cp * self.tp


def pipeline_layers(m) -> int:
    """How many layers the model lists for pipelining (``pipeline_layers()``): the GPT's and
    the recurrent models' embedding, blocks or layers, and head; the MLP's Linear layers."""
    return len(m.hidden_sizes) + 1 if m.kind == "mlp" else m.n_layers + 2


class MeshFamily(OwnPieces):
    """``--strategy pipeline`` (dp × pp) and ``hybrid`` (dp × pp × tp)."""

    names = {"pipeline": "pipeline parallel (with data-parallel replicas of the pipeline)",
             "hybrid": "the hybrid dp × pp × cp × tp mesh (tensor- and context-parallel "
                       "stages)"}
    flags = MeshFlags

    def problems(self, c, world_size: int) -> list[str]:
        """Every reason the mesh flags cannot run on ``world_size`` ranks (DESIGN.md §2: pp >
        layers, tp not dividing heads, batch not divisible into micro-batches, dp·pp·tp ≠
        world size, …)."""
        m, t = c.model, c.train
        if m.kind in UNLAYERED_MODELS:
            return [f"--strategy {t.strategy} splits a model's layers into stages; model "
                    f"{m.kind} has none (use single, dp, dp-naive, local-sgd, zero, ps, hogwild "
                    "or easgd)"]
        bad = [f"{flag} must be at least 1; got {value}" for flag, value in
               (("--pp", t.pp), ("--tp", t.tp), ("--cp", t.cp), ("--ep", t.ep), ("--dp", t.dp),
                ("--microbatches", t.microbatches), ("--virtual", t.virtual))
               if value is not None and value < 1]
        if bad:
            return bad
        problems = []
        dp = t.replicas(world_size)
        stage = f"--pp {t.pp}" + (f" × --cp {t.cp}" if t.cp > 1 else "") + (
            f" × --tp {t.tp}" if t.strategy == "hybrid" else "")
        if t.dp is None and world_size % t.replica_ranks:
            problems.append(f"{stage} does not divide the world of {count(world_size, 'rank')}"
                            f" into replicas of the pipeline; launch a multiple of "
                            f"{count(t.replica_ranks, 'rank')}")
        elif dp * t.replica_ranks != world_size:
            problems.append(f"--dp {dp} × {stage} = {count(dp * t.replica_ranks, 'rank')}, but "
                            f"the world has {world_size}")
        problems += schedule_problems(t)
        layers = pipeline_layers(m)
        if t.pp * t.virtual > layers:
            problems.append(f"--pp {t.pp} × --virtual {t.virtual} = {t.pp * t.virtual} stages, "
                            f"but model {m.kind} lists only {layers} layers to split")
        if dp >= 1 and t.batch_size // dp < t.m:
            problems.append(f"train.batch_size {t.batch_size} over {count(dp, 'replica')} leaves "
                            f"{t.batch_size // dp} rows for the smallest; it cannot split into "
                            f"--microbatches {t.m} (give --batch-size at least {dp * t.m})")
        if m.tie_embeddings and t.pp_schedule == "pipedream":
            problems.append("--tie-embeddings with --pp-schedule pipedream: the two copies would "
                            "be updated at different times and drift apart; untie them or use a "
                            "flushing schedule")
        if t.strategy == "hybrid":
            problems += (tensor_problems(c) + context_problems(c)
                         + ep_problems(c, max(dp, 1) * t.cp))
        return problems

    def workers(self, c, world_size: int) -> int | None:
        return None  # the micro-batch rule above checks the batch

    def stream(self, cfg, rank: int) -> int:
        """A tp group draws one stream: its ranks draw whole masks alike and each keeps its
        slice, as one device fed that stream would (Shoeybi et al. 2019, §3). Its ranks are
        adjacent in the mesh."""
        return rank // cfg.train.tp if cfg.train.strategy == "hybrid" else rank

    def task_problems(self, cfg, task) -> list[str]:
        vocab, tp = getattr(task.dataset, "vocab_size", 0), cfg.train.tp
        if cfg.train.strategy == "hybrid" and task.unit == "tok" and vocab % tp:  # a text file's
            return [f"--tp {tp} must divide the vocabulary of {vocab} symbols (from "
                    f"{cfg.data.path}): each tensor-parallel rank holds an equal share"]
        return []

    def describe(self, cfg, shape, world_size: int):
        t = cfg.train
        knobs = {"pp": t.pp, "m": t.m, "v": t.virtual,
                 "rows": t.batch_size, "bucket_bytes": t.bucket_bytes, "tp": t.tp}
        if t.strategy == "hybrid":
            return Hybrid.describe(shape, world_size, **knobs, cp=t.cp,
                                   sequence_parallel=t.sequence_parallel,
                                   attention=t.cp_attention, ep=t.ep,
                                   sparse=experts_shape(cfg.model),
                                   per_group=cfg.model.per_group)
        cls = PipeDream if t.pp_schedule == "pipedream" else Pipeline
        return cls.describe(shape, world_size, **knobs)

    def activations(self, cfg, world_size: int) -> Layout:
        """A stage's stash at its fullest: the (micro-batch, chunk) pairs its schedule holds
        forwarded and not yet backward (GPipe m, 1F1B p at the first stage, Huang et al. 2019;
        Narayanan et al. 2021), each a chunk's even share, 1/(p·v), of what one micro-batch
        keeps, beside what a micro-batch holds once (backward's widest moment); split over
        the hybrid's tensor-parallel ranks."""
        t = cfg.train
        rows = -(-t.batch_size // (t.replicas(world_size) * t.m))
        held = peak_stash(t.pp_schedule, t.pp, t.m, t.virtual, t.costs)
        return Layout(rows, Fraction(held, t.pp * t.virtual),
                      t.tp if t.strategy == "hybrid" else 1)

    def recompute(self, cfg, task) -> None:
        """Nothing yet: the pipeline marks its own chunks, or its tensor-parallel shard's
        attention cores, once it has built them."""

    def draws_parts(self, cfg) -> bool:
        return True  # a rank draws its stage, or its tp shard of it

    def built(self, cfg, shape, description) -> int:
        """A rank's share, but rank 0's whole model under ``--balance time``: it times every
        layer."""
        return shape.bytes if cfg.train.balance == "time" else description.holds["parameters"]

    def gathered(self, cfg, shape, world_size: int, description) -> int | None:
        """PipeDream's rank 0 scores the whole model, filled from every stage, beside its own
        stage; the flushing pipelines score in their layout and gather nothing."""
        if cfg.train.pp_schedule != "pipedream":
            return None
        return shape.bytes + description.holds["parameters"]

    def scored_rows(self, cfg, world_size: int) -> int:
        """A micro-batch's: a flushing pipeline scores in its training layout, one
        micro-batch's forward at a time (``pipeline/scoring.py``)."""
        if cfg.train.pp_schedule == "pipedream":
            return super().scored_rows(cfg, world_size)
        return self.activations(cfg, world_size).rows

    def mesh(self, cfg, comm):
        """``--dp`` replicas of ``--pp`` stages of ``--cp`` × ``--tp`` ranks each."""
        t = cfg.train
        return Mesh(comm, dp=t.replicas(comm.size), pp=t.pp, tp=t.tp, cp=t.cp, ep=t.ep)

    def build(self, cfg, task, make_optimizer, mesh):
        """Each stage the layers that ``--balance`` gives it (rank 0 says which), split over
        ``--tp`` ranks. A rank then frees the task's model but for what it trains (model
        distribution); ``gather_model`` fills rank 0's whole again to evaluate it. The task's
        model is unfilled (:meth:`draws_parts`): a rank draws only what it trains."""
        t, world = cfg.train, mesh.world
        schedule = built(t)
        layers = task.model.pipeline_layers()
        if t.balance == "time":  # rank 0 measures, so that every rank partitions alike
            if world.rank == 0:
                fill(task.model.parameters())  # every layer drawn, to time it
            weights = layer_times(layers, _example(task, t, mesh.dp)) if world.rank == 0 else None
            weights, unit = world.allgather_obj(weights, "layer times")[0], "s"
        else:
            weights, unit = parameter_counts(layers), "params"
        ranges = partition(weights, t.pp * t.virtual)
        if world.rank == 0:
            print(_layout(cfg, mesh, ranges, layer_names(task.model), weights, unit),
                  flush=True)
        knobs = {"schedule": schedule, "ranges": ranges, "grad_clip": cfg.optim.grad_clip,
                 "bucket_bytes": t.bucket_bytes, "recompute": t.recompute}
        if t.strategy == "hybrid" and cfg.model.kind in TENSOR_MODELS:
            strategy = Hybrid(task.model, make_optimizer, task, mesh,
                              sequence_parallel=t.sequence_parallel, attention=t.cp_attention,
                              layout=t.cp_layout, capacity=t.capacity_scope, **knobs)
        else:
            cls = PipeDream if t.pp_schedule == "pipedream" else Pipeline
            strategy = cls(task.model, make_optimizer, task, mesh, **knobs)
        release(task.model, strategy.params)
        return strategy


def _layout(cfg, mesh, ranges, names, weights, unit) -> str:
    """What rank 0 says: each stage's layers (and chunk), the hybrid's grid of ranks, and
    what a layout of one stage or one tp rank amounts to."""
    t = cfg.train
    lines = describe(ranges, names, weights, unit).splitlines()
    if t.virtual > 1:  # virtual stage k is chunk k // p of rank k % p
        lines = [f"{line} → rank {k % t.pp}, chunk {k // t.pp}" for k, line in enumerate(lines)]
    if t.strategy == "hybrid":
        lines.insert(0, draw(mesh.shape))
    if t.strategy == "hybrid" and t.tp > 1:
        lines.append(f"each stage's matrices split over its {t.tp} tp ranks, heads and "
                     "vocabulary included" + (", its sequence too" if t.sequence_parallel
                                              else ""))
    elif t.strategy == "hybrid":
        lines.append("--tp 1: no stage is split (give --tp N to split each stage's matrices"
                     + ("; model " + cfg.model.kind + " has no tensor-parallel form, so this "
                        "runs as --strategy pipeline" if cfg.model.kind not in TENSOR_MODELS
                        else "") + ")")
    if t.strategy == "hybrid" and t.cp > 1:
        lines.append(f"each sequence's {cfg.data.seq_len} positions split over its {t.cp} cp "
                     f"ranks, {cfg.data.seq_len // t.cp} each ({t.cp_layout}), attending by "
                     f"{t.cp_attention}")
    if t.strategy == "hybrid" and cfg.model.experts:
        lines.append(expert_layout(cfg, mesh.dp * mesh.cp))
    if t.pp == 1 and mesh.tp == mesh.cp == mesh.ep == 1:
        lines.append(f"--pp 1: one stage, so each of the {mesh.dp} replica"
                     f"{'s' if mesh.dp > 1 else ''} holds the whole model: data parallelism "
                     "(give --pp N to split the layers)")
    return "\n".join(lines)


def _example(task, t, dp: int):
    """The inputs of one micro-batch of a replica, to time each layer on."""
    batch, _ = task.batch(0, max(1, t.batch_size // dp // t.m))
    return task.split(batch)[0]
