"""``python -m scratchpar.train``: parse the config, build the task and strategy, train, report."""

from __future__ import annotations

import sys

from ..backend import BackendError
from ..comm.abort import abort_on_exception, launched_by_mpi
from ..data import DataError
from .build import build_trainer
from .checkpoint import CheckpointError
from .config import ConfigError, load_config
from .loop import format_summary


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 for a bad config, checkpoint, backend or data: errors that a rank
    finds before any message, so it may exit by itself (ranks given the same flags and files
    all do). Any other exception propagates."""
    try:
        cfg = load_config(argv)
        trainer = build_trainer(cfg)
        summary = trainer.run()
    except (ConfigError, CheckpointError, BackendError, DataError) as e:
        print(f"scratchpar.train: {e}", file=sys.stderr)
        return 2
    print(format_summary(summary), flush=True)
    return 0


if __name__ == "__main__":
    if launched_by_mpi():  # an exception on one rank must end them all, not hang the rest
        from ..comm.mpi import Communicator  # loads MPI: only under mpiexec

        abort_on_exception(Communicator(name="world"))
    sys.exit(main())
