"""Start a benchmark's MPI job: JSON config in, rank 0's JSON result out, a hard timeout."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository root, so workers import this tree
THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class JobFailed(RuntimeError):
    """An MPI job exited with an error or ran past its timeout."""


def mpiexec() -> str:
    """The mpiexec beside this Python (the mpich wheel's), else the one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        raise JobFailed("no mpiexec beside this Python or on PATH: install the mpich extra")
    return found


def job(n: int, target: str, cfg: dict, device: str = "cpu", env: dict | None = None,
        timeout: float = 600) -> dict:
    """``mpiexec -n n python -m scratchpar.bench.worker target --config JSON --device D --out F``
    and the result its rank 0 wrote (``target``: "scratchpar.bench.dp.worker:measure"); ranks'
    stderr passes through, stdout is kept for the error message. The job runs in its own
    session, so a timeout kills every rank."""
    env = {**THREADS, **(env or {})}
    module, _, name = target.partition(":")
    print(f"{module.split('.')[-2]}: {name}, {n} ranks", file=sys.stderr, flush=True)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="scratchpar-bench-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", "scratchpar.bench.worker", target,
               "--config", json.dumps(cfg), "--device", device, "--out", str(out)]
        running = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": path, **env},
                                   stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, _ = running.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(running.pid, signal.SIGKILL)  # the session's group: mpiexec and every rank
            running.communicate()
            raise JobFailed(f"{' '.join(cmd)} still running after {timeout:.0f} s: killed") \
                from None
        if running.returncode != 0:
            raise JobFailed(f"{' '.join(cmd)} exited with {running.returncode}:\n{stdout[-4000:]}")
        return json.loads(out.read_text())
