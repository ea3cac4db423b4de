"""Abort on exception: an exception that escapes on one rank ends every rank, with a report.

Why it is needed: MPI has no idea that a Python exception killed a rank. Under plain ``mpirun``
the failing rank finalizes MPI on its way out while the others wait for its messages, and the job
hangs (the watchdog frees them only after ``$SCRATCHPAR_COMM_TIMEOUT``, 600 s by default).
:func:`abort_on_exception` installs a ``sys.excepthook`` that prints which rank failed, what it
was doing and the traceback, then calls ``MPI_Abort``: the launcher ends every rank, the stuck and
the sleeping too, and the job exits non-zero within about a second. It runs only when an exception
escapes, so it costs nothing on the way. (``python -m mpi4py`` aborts too, but only when the user
remembers to launch through it, and it says nothing about the communication in flight.)

Only exceptions reach the hook: a rank that alone calls ``sys.exit(n)`` still leaves the others
waiting. Errors that every rank finds alike before any message (a ``ConfigError``) may exit
normally on every rank.
"""

from __future__ import annotations

import array
import fcntl
import os
import stat
import sys
import termios
import time
import traceback

LAUNCHER_ENV = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")  # MPICH/Intel, PMIx, Open MPI
COMM_PACKAGE = os.path.dirname(os.path.abspath(__file__))
DRAIN_S = 2.0  # at most this long for the launcher to read the report before the abort


def launched_by_mpi() -> bool:
    """True in a process that ``mpiexec``/``mpirun`` started (read from the environment, so a
    plain ``python`` run never loads MPI)."""
    return any(name in os.environ for name in LAUNCHER_ENV)


def abort_on_exception(comm) -> None:
    """From now on, an exception escaping on this rank ends the whole job with exit code 1.

    ``comm`` is the world communicator that the program splits and dups its others from, so
    its ``last_op`` covers them all. On one rank nothing changes: Python reports and exits.
    """
    if comm.size == 1:
        return

    def hook(kind, error, tb):
        sys.stdout.flush()  # what the rank printed so far: MPI_Abort would drop the buffer
        sys.stderr.write(failure_report(comm, error, tb))
        end_job(comm, 1)

    sys.excepthook = hook


def refuse(comm, why: str) -> None:
    """Stop a run that every rank finds wrong alike before any message (the wrong number of
    ranks): rank 0 says ``why``, and every rank exits with status 2."""
    if comm.rank == 0:
        print(why, flush=True)
    sys.exit(2)


def end_job(comm, code: int) -> None:
    """End every rank of the job with ``code``, once what this rank wrote has reached the
    launcher. MPI_Abort's own line ("Abort(3) on node …") is not shown: the report before it
    says why. MPI_Abort may return (MPICH's does, while the launcher tears the job down), so
    this rank then exits by itself: it never goes on as if nothing had happened."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
        _drain(stream)
    _quiet()
    comm.abort(code)
    _exit(code)


def _quiet() -> None:
    """Send what this process writes to its standard error from now on to /dev/null."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)


_exit = os._exit  # no clean-up handlers: MPI's finalize would wait for the ranks being ended


def failure_report(comm, error: BaseException, tb) -> str:
    """``rank 1 of 3 failed outside communication (last operation: all_reduce/ring #12 of
    shape (10,) float64 on world): ValueError: …`` (the message's first line), the traceback,
    and a last line saying that the job ends."""
    where = "in a communication call" if _through_comm(tb) else "outside communication"
    first_line = next(iter(str(error).splitlines()), "")
    trace = "".join(traceback.format_exception(type(error), error, tb))
    return (f"scratchpar: rank {comm.rank} of {comm.size} failed {where} (last operation: "
            f"{comm.last_op or 'none yet'}): {type(error).__name__}: {first_line}\n{trace}"
            f"scratchpar: rank {comm.rank} ends all {comm.size} ranks (MPI_Abort)\n")


def _through_comm(tb) -> bool:
    """Whether the exception came out of a function of this package (a wait, a collective)."""
    frames = traceback.walk_tb(tb)
    return any(os.path.dirname(os.path.abspath(f.f_code.co_filename)) == COMM_PACKAGE
               for f, _ in frames)


def _drain(stream) -> None:
    """Wait until the launcher has read what this rank wrote to ``stream``, when it is a pipe
    (as under mpiexec): ``MPI_Abort`` tears the job down at once, losing unread bytes."""
    try:
        fd = stream.fileno()
        is_pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
    except (OSError, ValueError):  # no file descriptor behind the stream
        return
    unread = array.array("i", [0])
    deadline = time.monotonic() + DRAIN_S
    while is_pipe and time.monotonic() < deadline:
        fcntl.ioctl(fd, termios.FIONREAD, unread)  # bytes still in the pipe
        if unread[0] == 0:
            return
        time.sleep(1e-3)
