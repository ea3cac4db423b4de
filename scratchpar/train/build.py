"""Assemble a Trainer from a Config in two phases: what each rank builds alone (checked, then
agreed on by every rank), then what the ranks build together (the strategy)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .. import kernels, nn
from ..backend import BackendError, set_device
from ..comm.agree import agree, agreeing
from ..data import DataError
from ..device_rng import DeviceRandom
from ..trace.tracer import Tracer
from .checkpoint import CheckpointError
from .loop import Trainer
from .memory import memory_problems
from .optimizer import build_schedule, optimizer_factory
from .option import ConfigError
from .paths import output_problems, unshared_save
from .precision import apply_precision
from .stored import Stored, open_checkpoint
from .strategies import REGISTRY
from .task import Task, build_task
from .validate import validate

# what a bad input makes a rank raise before training: the ranks agree on these (comm/agree.py);
# OSError: a file or path the checks did not foresee (a name too long, a permission, a full disk)
RANK_ERRORS = (ConfigError, CheckpointError, BackendError, DataError, MemoryError, OSError)


@dataclass
class Prepared:
    """What one rank builds alone, before any message: the world it trains in, its task and
    its optimizer factory, its dropout stream, and the checkpoint it opened (its meta read,
    its arrays not yet) if resuming."""

    comm: object
    task: Task
    make_optimizer: object
    dropout_gen: DeviceRandom
    checkpoint: Stored | None


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
    family = REGISTRY[cfg.train.strategy]
    problems = validate(cfg, size)
    if not problems:  # the estimate assumes a valid config; the sizes it refuses allocate nothing
        problems = (output_problems(cfg) if rank == 0 else []) + \
            memory_problems(cfg, size, on_node)
    problems += family.node_problems(cfg, size, on_node)
    if problems:
        raise ConfigError(problems)
    set_device(cfg.train.device, local_rank, on_node)
    kernels.mode()  # a bad SCRATCHPAR_FUSED is a bad input, told before anything is built
    dropout_gen = DeviceRandom(cfg.train.seed, 1, family.stream(cfg, rank))
    with nn.deferred() if family.draws_parts(cfg) else contextlib.nullcontext():
        task = build_task(cfg, dropout_gen)  # every rank alike (DP broadcasts rank 0's)
    problems = family.task_problems(cfg, task)
    if problems:
        raise ConfigError(problems)
    apply_precision(cfg, task)
    family.recompute(cfg, task)
    checkpoint = open_checkpoint(cfg.train.resume) if cfg.train.resume else None
    return Prepared(comm, task, optimizer_factory(cfg, task.scaler), dropout_gen, checkpoint)


def assemble(cfg, parts: Prepared) -> Trainer:
    """The strategy over the ranks (its construction may communicate: broadcasts, dups), the
    Trainer, and the checkpoint restored into it. Restoring is a rank's own check again (only
    rank r reads its replica's part), so the ranks agree on it before training starts."""
    comm = parts.comm
    if cfg.train.trace:  # the strategy and its collectives record on the communicator's tracer
        comm.tracer = Tracer(comm.rank)
        comm.tracer.align(comm.barrier)
    if cfg.train.save is not None and comm is not None and comm.size > 1:
        agree(comm, unshared_save(comm, cfg.train.save))  # every rank writes its pieces there
    family = REGISTRY[cfg.train.strategy]
    mesh = None if comm is None else family.mesh(cfg, comm)  # freed by the Trainer at its end
    strategy = family.build(cfg, parts.task, parts.make_optimizer, mesh)
    trainer = Trainer(cfg, strategy, parts.task, build_schedule(cfg), parts.dropout_gen, comm,
                      REGISTRY[cfg.train.strategy].computing(cfg, comm.size if comm else 1))
    if parts.checkpoint is not None:
        with agreeing(comm, (CheckpointError,)):
            try:
                trainer.restore(parts.checkpoint, cfg.train.resume)
            finally:
                parts.checkpoint.close()
        parts.checkpoint = None  # restored: its files need not stay open for the run
    return trainer


def build_trainer(cfg, comm=None) -> Trainer:
    """A Trainer for this rank of ``comm``, the world that trains together (see
    :func:`prepare`); raises :class:`~scratchpar.comm.agree.RankErrors` on every rank if any
    rank's checks failed."""
    with agreeing(comm, RANK_ERRORS):
        parts = prepare(cfg, comm)
    return assemble(cfg, parts)
