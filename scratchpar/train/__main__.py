"""``python -m scratchpar.train``: parse the config, build the task and strategy, train, report."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import time
import warnings

import numpy as np

from ..allocator import keep_freed_memory
from ..comm.abort import abort_on_exception, end_job, launched_by_mpi
from ..comm.agree import RankErrors, agreeing
from .build import RANK_ERRORS, assemble, prepare
from .checkpoint import CheckpointError, read_meta
from .cli import load_config
from .divergence import Diverged
from .loop import format_summary

EXIT_BAD_INPUT, EXIT_DIVERGED, EXIT_INTERRUPTED = 2, 3, 130
END_WAIT_S = 10.0  # how long a rank that diverged second waits for the first one's end


def main(argv: list[str] | None = None, comm=None) -> int:
    """Exit status 0 on success, 3 if training diverged, 130 if interrupted (Ctrl-C), and 2
    for a bad input (flags, config, paths, data, checkpoint, device or memory), which every
    rank checks before any message and all agree on. Any other exception propagates (under
    MPI, to the abort path). ``comm`` is the world when launched by MPI. Rank 0 alone prints,
    each message once per job."""
    rank, size = (0, 1) if comm is None else (comm.rank, comm.size)
    with np.errstate(all="ignore"), warnings.catch_warnings():  # non-finite: caught, reported
        if rank != 0:
            warnings.simplefilter("ignore")  # rank 0 shows a warning once for the job
        cfg = trainer = None
        try:
            with agreeing(comm, RANK_ERRORS):
                with _only_rank_0_prints(rank):  # --help
                    cfg = load_config(argv, world_size=size)
                parts = prepare(cfg, comm)
            trainer = assemble(cfg, parts)
            summary = trainer.run()
        except KeyboardInterrupt:
            return _interrupted(rank, size, comm, cfg, trainer)
        except RankErrors as e:
            _report(rank, e.lines())
            return EXIT_BAD_INPUT
        except Diverged as e:
            if e.alone and size > 1:  # the other ranks would wait for it: end the job
                _diverged_alone(rank, comm, trainer, e)
            _report(rank, [str(e)])
            return EXIT_DIVERGED
    if summary is not None:  # rank 0 reports for the job
        print(format_summary(summary), flush=True)
    return 0


def _diverged_alone(rank: int, comm, trainer, error: Diverged) -> None:
    """A rank whose strategy does not step with the others diverged: the first such rank
    reports and ends the job; one that diverged after it says nothing and waits for that end
    (ending the job itself should it not come). Never returns."""
    if trainer.first_to_report():
        print(f"scratchpar.train: rank {rank}: {error}", file=sys.stderr)
    else:
        time.sleep(END_WAIT_S)
    end_job(comm, EXIT_DIVERGED)


def _interrupted(rank: int, size: int, comm, cfg, trainer) -> int:
    """Ctrl-C: every rank got SIGINT from the launcher, each somewhere in its step. Rank 0 says
    where the run stopped and which checkpoint is intact, in one line, and ends the job with
    130 (128 + SIGINT, as shells expect): a rank caught inside a blocking MPI call, whose
    peers left, could not end by itself. The others wait for that end (and exit 130 should it
    not come), without finalizing MPI: a peer may have left a message unmatched."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the report
    if rank == 0:
        if trainer is not None:
            trainer.interrupted()
        where = "before training started" if trainer is None else \
            f"at step {trainer.step} of {cfg.train.steps}"
        lead = "\n" if sys.stderr.isatty() else ""  # past the ^C the terminal echoed
        print(f"{lead}scratchpar.train: interrupted {where}{_intact(cfg)}", file=sys.stderr)
    if size == 1:
        return EXIT_INTERRUPTED
    if rank == 0:
        end_job(comm, EXIT_INTERRUPTED)
    time.sleep(END_WAIT_S)
    os._exit(EXIT_INTERRUPTED)


def _intact(cfg) -> str:
    """Which checkpoint ``--save`` left (a save is atomic: the last one that completed)."""
    if cfg is None or not cfg.train.save:
        return ""
    try:
        step = read_meta(cfg.train.save)["step"]
    except (CheckpointError, KeyError):
        return f"; no checkpoint in {cfg.train.save} yet"
    return (f"; the checkpoint in {cfg.train.save} (step {step}) is intact: --resume "
            f"{cfg.train.save} continues from it")


def _only_rank_0_prints(rank: int):
    return contextlib.nullcontext() if rank == 0 else contextlib.redirect_stdout(io.StringIO())


def _report(rank: int, lines: list[str]) -> None:
    if rank == 0:
        for line in lines:
            print(f"scratchpar.train: {line}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    keep_freed_memory()  # NumPy's short-lived arrays reuse the heap instead of re-faulting it
    world = None
    if launched_by_mpi():  # an exception on one rank must end them all, not hang the rest
        from ..comm.mpi import Communicator  # loads MPI: only under mpiexec

        world = Communicator(name="world")
        abort_on_exception(world)
    sys.exit(main(comm=world))
