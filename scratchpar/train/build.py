"""Assemble a Trainer from a Config: device, task, optimizer, schedule and strategy."""

from __future__ import annotations

from .. import optim, parallel
from ..backend import rng, set_device
from ..trace.tracer import Tracer
from .config import ConfigError
from .loop import Trainer
from .task import build_task
from .validate import validate


def build_optimizer(cfg, params):
    o = cfg.optim
    if o.optimizer == "sgd":
        return optim.SGD(params, o.lr, momentum=o.momentum, weight_decay=o.weight_decay)
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
    if t.strategy == "local-sgd":
        return parallel.LocalSGD(*common, every=t.local_sgd_every, warmup=t.local_sgd_warmup,
                                 grad_clip=clip, bucket_bytes=round(t.bucket_mb * 2**20))
    return parallel.DataParallel(*common, bucket_bytes=round(t.bucket_mb * 2**20),
                                 grad_clip=clip)


def build_trainer(cfg, comm=None) -> Trainer:
    """A Trainer for this rank of ``comm``, the world that trains together.

    Without ``comm`` (a plain ``python`` run), a strategy other than ``single`` gets a world
    of one rank; ``single`` never loads MPI. Every rank initializes the model alike (rank 0's
    parameters are broadcast anyway) and draws its own dropout masks.
    """
    if comm is None and cfg.train.strategy != "single":
        from ..comm.mpi import Communicator  # loads MPI: a one-rank world outside mpiexec
        comm = Communicator(name="world")
    rank, size = (0, 1) if comm is None else (comm.rank, comm.size)
    problems = validate(cfg, size)
    if problems:
        raise ConfigError(problems)
    set_device(cfg.train.device)
    dropout_gen = rng(cfg.train.seed, 1, rank)
    task = build_task(cfg, dropout_gen)
    optimizer = build_optimizer(cfg, task.model.parameters())
    if cfg.train.trace:  # the strategy and its collectives record on the communicator's tracer
        comm.tracer = Tracer(rank)
        comm.tracer.align(comm.barrier)
    strategy = build_strategy(cfg, task, optimizer, comm)
    return Trainer(cfg, strategy, task, build_schedule(cfg), dropout_gen, comm)
