"""Starting real MPI jobs from pytest: the venv's mpiexec (any MPI's), a hard timeout, one thread
per rank, and the job's own lines apart from its launcher's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scratchpar.jobs.launcher import mpi_env, mpiexec, own_lines

ROOT = Path(__file__).resolve().parents[2]


def run_mpi(n: int, args: list[str], timeout: float, env: dict | None = None):
    """``mpiexec -n n python args…`` from the repository root; returns the CompletedProcess,
    its stdout and stderr what the job printed (Open MPI's own lines left out).

    A job that outlives ``timeout`` is killed and reported as a test failure, never a hang.
    """
    full_env = {**os.environ, **mpi_env(), "PYTHONPATH": str(ROOT), **(env or {})}
    cmd = [mpiexec(), "-n", str(n), sys.executable, *args]
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired as expired:
        out = (expired.stdout or b"")[-4000:]
        raise AssertionError(f"{' '.join(cmd)} still running after {timeout} s:\n{out}") from None
    done.stdout, done.stderr = own_lines(done.stdout), own_lines(done.stderr)
    return done
