"""Start a measurement's MPI job: JSON config in, rank 0's JSON result out, a hard timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from .launcher import JobFailed, mpi_env, mpiexec

ROOT = Path(__file__).resolve().parents[2]  # the repository root, so workers import this tree


def job(n: int, target: str, cfg: dict, device: str = "cpu", env: dict | None = None,
        timeout: float = 600) -> dict:
    """``mpiexec -n n python -m scratchpar.jobs.worker target --config JSON --device D --out F``
    and the result its rank 0 wrote (``target``: "scratchpar.bench.dp.worker:measure"); ranks'
    stderr passes through, stdout is kept for the error message. The job runs in its own
    session, so a timeout kills every rank."""
    env = {**mpi_env(), **(env or {})}
    module, _, name = target.partition(":")
    print(f"{module.split('.')[-2]}: {name}, {n} ranks", file=sys.stderr, flush=True)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="scratchpar-bench-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", "scratchpar.jobs.worker", target,
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
