"""Starting real MPI jobs from pytest: the venv's mpiexec, a hard timeout, one thread per rank."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scratchpar.bench.mpijob import mpiexec

ROOT = Path(__file__).resolve().parents[2]


def run_mpi(n: int, args: list[str], timeout: float, env: dict | None = None):
    """``mpiexec -n n python args…`` from the repository root; returns the CompletedProcess.

    A job that outlives ``timeout`` is killed and reported as a test failure, never a hang.
    """
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **(env or {})}
    cmd = [mpiexec(), "-n", str(n), sys.executable, *args]
    try:
        return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired as expired:
        out = (expired.stdout or b"")[-4000:]
        raise AssertionError(f"{' '.join(cmd)} still running after {timeout} s:\n{out}") from None
