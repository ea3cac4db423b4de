"""``python -m scratchpar.train``: parse the config, build the task and strategy, train, report."""

from __future__ import annotations

import sys

from ..allocator import keep_freed_memory
from ..backend import BackendError
from ..comm.abort import abort_on_exception, launched_by_mpi
from ..data import DataError
from .build import build_trainer
from .checkpoint import CheckpointError
from .config import ConfigError, load_config
from .loop import format_summary


def main(argv: list[str] | None = None, comm=None) -> int:
    """Exit status 0, or 2 for a bad config, checkpoint, backend or data: errors that a rank
    finds before any message, so it may exit by itself (ranks given the same flags and files
    all do). Any other exception propagates. ``comm`` is the world when launched by MPI."""
    try:
        cfg = load_config(argv, world_size=1 if comm is None else comm.size)
        summary = build_trainer(cfg, comm).run()
    except (ConfigError, CheckpointError, BackendError, DataError) as e:
        # every rank validates the same config alike, so one report is enough; the other errors
        # may be a rank's own (its GPU, its copy of a file), so each rank says what it saw
        if comm is None or comm.rank == 0 or not isinstance(e, ConfigError):
            print(f"scratchpar.train: {e}", file=sys.stderr)
        return 2
    if summary is not None:  # rank 0 reports for the job
        print(format_summary(summary), flush=True)
    return 0


if __name__ == "__main__":
    keep_freed_memory()  # NumPy's short-lived arrays reuse the heap instead of re-faulting it
    world = None
    if launched_by_mpi():  # an exception on one rank must end them all, not hang the rest
        from ..comm.mpi import Communicator  # loads MPI: only under mpiexec

        world = Communicator(name="world")
        abort_on_exception(world)
    sys.exit(main(comm=world))
