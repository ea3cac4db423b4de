"""Start an MPI job from a benchmark: the mpiexec beside this Python, one thread per rank, a hard
timeout that kills the whole job."""

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


class JobFailed(RuntimeError):
    """An MPI job exited with an error or ran past its timeout."""


def mpiexec() -> str:
    """The mpiexec beside this Python (the mpich wheel's), else the one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        raise JobFailed("no mpiexec beside this Python or on PATH: install the mpich extra")
    return found


def run_module(n: int, module: str, args: list[str], timeout: float, env: dict) -> None:
    """``mpiexec -n n python -m module args…``; ranks' stderr passes through, stdout is kept for
    the error message. The job runs in its own session so a timeout kills every rank."""
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                            os.environ.get("PYTHONPATH")])),
                **env}
    cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", module, *args]
    job = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        out, _ = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)  # the session's group: mpiexec and every rank
        job.communicate()
        raise JobFailed(f"{' '.join(cmd)} still running after {timeout:.0f} s: killed") from None
    if job.returncode != 0:
        raise JobFailed(f"{' '.join(cmd)} exited with {job.returncode}:\n{out[-4000:]}")


def run_part(n: int, module: str, part: str, cfg: dict, tmp: Path, device: str,
             timeout: float) -> dict:
    """One part of a benchmark with parts: ``mpiexec -n n python -m module`` given ``{"part":
    part, **cfg}`` as JSON and ``--device``, and the result its rank 0 wrote (``write_result``)."""
    name = module.rsplit(".", 1)[-1].removesuffix("_worker")  # ps, async
    print(f"{name}: {part}, {n} ranks", file=sys.stderr, flush=True)
    out = tmp / f"{name}-{part}-n{n}.json"
    run_module(n, module, ["--config", json.dumps({"part": part, **cfg}), "--device", device,
                           "--out", str(out)], timeout, {})
    return json.loads(out.read_text())


def per_world_size(ranks: list[int], measure) -> tuple[dict, tuple[float, float]]:
    """``{n: measure(n, tmp)}`` for each world size, with a scratch folder for the jobs' files,
    and the 1-minute load average before and after (a shared machine's other work shows there).
    Raises :class:`JobFailed` from the first job that fails."""
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="scratchpar-bench-") as tmp:
        results = {n: measure(n, Path(tmp)) for n in ranks}
    return results, (before, os.getloadavg()[0])


def write_result(comm, path: str, result: dict) -> int:
    """A worker's end: rank 0 writes its JSON ``result`` to ``path`` for the driver; every
    rank's exit status 0."""
    if comm.rank == 0:
        Path(path).write_text(json.dumps(result))
    return 0
