"""Assemble a Trainer from a Config in two phases: what each rank builds alone (checked, then
agreed on by every rank), then what the ranks build together (the strategy)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import optim, parallel
from ..backend import BackendError, set_device
from ..comm.agree import agreeing
from ..data import DataError
from ..device_rng import DeviceRandom
from ..parallel.zero import STAGES
from ..trace.tracer import Tracer
from .asynchronous import build_easgd, build_hogwild
from .checkpoint import CheckpointError, load_checkpoint
from .config import ConfigError
from .loop import Trainer
from .memory import memory_problems
from .paths import output_problems
from .pipeline import build_pipeline
from .ps import build_ps
from .task import Task, build_task
from .validate import validate
from .validate_async import window_problems

# what a bad input makes a rank raise before training: the ranks agree on these (comm/agree.py);
# OSError: a file or path the checks did not foresee (a name too long, a permission, a full disk)
RANK_ERRORS = (ConfigError, CheckpointError, BackendError, DataError, MemoryError, OSError)


def build_optimizer(cfg, params):
    o = cfg.optim
    if o.optimizer == "sgd":  # under EASGD, momentum is Nesterov's: EAMSGD (Algorithm 2)
        return optim.SGD(params, o.lr, momentum=o.momentum, weight_decay=o.weight_decay,
                         nesterov=cfg.train.strategy == "easgd" and o.momentum > 0)
    cls = optim.Adam if o.optimizer == "adam" else optim.AdamW
    return cls(params, o.lr, weight_decay=o.weight_decay)


def build_schedule(cfg):
    o, steps = cfg.optim, cfg.train.steps
    if o.schedule == "constant":
        return optim.Constant(o.lr)
    cls = optim.WarmupCosine if o.schedule == "cosine" else optim.WarmupLinear
    return cls(o.lr, o.warmup, steps, o.min_lr)


def build_strategy(cfg, task, optimizer, comm):
    """The strategy that ``--strategy`` names; every one but ``single`` needs ``comm``."""
    t, clip = cfg.train, cfg.optim.grad_clip
    common = (task.model, optimizer, task.loss, task.count, comm)
    if t.strategy == "single":
        return parallel.SingleDevice(task.model, optimizer, task.loss, clip)
    if t.strategy == "dp-naive":
        return parallel.DataParallelNaive(*common, grad_clip=clip)
    if t.strategy in ("pipeline", "hybrid"):
        return build_pipeline(cfg, task, comm)
    if t.strategy == "ps":
        return build_ps(cfg, task, comm)
    if t.strategy == "hogwild":
        return build_hogwild(cfg, task, optimizer, comm)
    if t.strategy == "easgd":
        return build_easgd(cfg, task, optimizer, comm)
    if t.strategy == "zero":
        return STAGES[t.zero_stage](*common, bucket_bytes=t.bucket_bytes, grad_clip=clip,
                                    offload=t.offload == "cpu")
    if t.strategy == "local-sgd":
        return parallel.LocalSGD(*common, every=t.local_sgd_every, warmup=t.local_sgd_warmup,
                                 grad_clip=clip, bucket_bytes=t.bucket_bytes)
    return parallel.DataParallel(*common, bucket_bytes=t.bucket_bytes,
                                 grad_clip=clip)


@dataclass
class Prepared:
    """What one rank builds alone, before any message: the world it trains in, its task and
    optimizer, its dropout stream, and the checkpoint it read (arrays, meta) if resuming."""

    comm: object
    task: Task
    optimizer: object
    dropout_gen: DeviceRandom
    checkpoint: tuple[dict, dict] | None


def prepare(cfg, comm=None) -> Prepared:
    """This rank's checks and parts, with no message to another rank. Raises one of
    RANK_ERRORS for a bad input: the config for this world, rank 0's output paths, the memory
    the run needs against what this rank has (before allocating anything), this rank's device,
    data and checkpoint files.

    Without ``comm`` (a plain ``python`` run), a strategy other than ``single`` gets a world
    of one rank; ``single`` never loads MPI.
    """
    if comm is None and cfg.train.strategy != "single":
        from ..comm.mpi import Communicator  # loads MPI: a one-rank world outside mpiexec
        comm = Communicator(name="world")
    rank, size = (0, 1) if comm is None else (comm.rank, comm.size)
    local_rank, on_node = (0, 1) if comm is None else (comm.local_rank, comm.local_size)
    problems = validate(cfg, size)
    if not problems:  # the estimate assumes a valid config; the sizes it refuses allocate nothing
        problems = (output_problems(cfg) if rank == 0 else []) + \
            memory_problems(cfg, size, on_node)
    problems += window_problems(cfg, size, on_node)
    if problems:
        raise ConfigError(problems)
    set_device(cfg.train.device, local_rank)
    # every rank its own dropout masks, but a tp group one stream: its ranks draw whole masks
    # alike and each keeps its slice, as one device fed that stream would (Megatron §3)
    stream = rank // cfg.train.tp if cfg.train.strategy == "hybrid" else rank
    dropout_gen = DeviceRandom(cfg.train.seed, 1, stream)
    task = build_task(cfg, dropout_gen)  # every rank initializes alike (DP broadcasts rank 0's)
    vocab, tp = getattr(task.dataset, "vocab_size", 0), cfg.train.tp
    if cfg.train.strategy == "hybrid" and task.unit == "tok" and vocab % tp:  # a text file's
        raise ConfigError([f"--tp {tp} must divide the vocabulary of {vocab} symbols (from "
                           f"{cfg.data.path}): each tensor-parallel rank holds an equal share"])
    optimizer = build_optimizer(cfg, task.model.parameters())
    checkpoint = load_checkpoint(cfg.train.resume) if cfg.train.resume else None
    return Prepared(comm, task, optimizer, dropout_gen, checkpoint)


def assemble(cfg, parts: Prepared) -> Trainer:
    """The strategy over the ranks (its construction may communicate: broadcasts, dups), the
    Trainer, and the checkpoint restored into it. Restoring is a rank's own check again (only
    rank r reads its replica's part), so the ranks agree on it before training starts."""
    comm = parts.comm
    if cfg.train.trace:  # the strategy and its collectives record on the communicator's tracer
        comm.tracer = Tracer(comm.rank)
        comm.tracer.align(comm.barrier)
    strategy = build_strategy(cfg, parts.task, parts.optimizer, comm)
    trainer = Trainer(cfg, strategy, parts.task, build_schedule(cfg), parts.dropout_gen, comm)
    if parts.checkpoint is not None:
        with agreeing(comm, (CheckpointError,)):
            trainer.restore(*parts.checkpoint, cfg.train.resume)
        parts.checkpoint = None  # restored: its arrays need not stay for the run
    return trainer


def build_trainer(cfg, comm=None) -> Trainer:
    """A Trainer for this rank of ``comm``, the world that trains together (see
    :func:`prepare`); raises :class:`~scratchpar.comm.agree.RankErrors` on every rank if any
    rank's checks failed."""
    with agreeing(comm, RANK_ERRORS):
        parts = prepare(cfg, comm)
    return assemble(cfg, parts)
