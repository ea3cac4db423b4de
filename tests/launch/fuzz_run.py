"""Running one fuzz case under limits and judging it: a fresh folder, a hard timeout, an
address-space limit, and a tag in the environment by which every process of a timed-out job is
found and killed (MPICH's proxy and ranks start sessions of their own).

Reproduce cases outside pytest, keeping their folders: ``python tests/launch/fuzz_run.py SEED I…``.
"""

from __future__ import annotations

import os
import random
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from fuzz_cases import CHECKPOINT, make_case
from fuzz_files import CORRUPTIONS, PREPARED, populate

from scratchpar.jobs.launcher import intel_mpi, mpi_env, mpiexec, own_lines

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60
LIMIT_AS = 2 << 30  # per process: a rank maps ~420 MiB (and starts with no less than ~224)
# Intel MPI maps 2.2 GiB more at MPI_Init, untouched (its shared-memory cells and heap: a rank
# starts at VmSize 2.3 GiB); the limit allows for it and still catches the same runaway arrays.
LIMIT_AS += (9 << 30) // 4 if intel_mpi() else 0
ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       "PYTHONPATH": str(ROOT), "SCRATCHPAR_COMM_TIMEOUT": "30"}
EXITS = (0, 2, 3)  # trained, invalid input, diverged
PROGRESS = re.compile(r"\r|\d+%\||^step \d+/\d+ \(\d+%\) · ")  # tqdm's bar; a log's plain line
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# MPICH's own lines: its banner (each line starts with "="), one per rank that called MPI_Abort
LAUNCHER = re.compile(r"=|YOUR APPLICATION TERMINATED|This typically refers to a problem with your "
                      r"application|Please see the FAQ|Abort\(\d+\) on node |\[(mpiexec|proxy)[@:]")


@dataclass
class Result:
    command: list[str]
    cwd: Path
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    seconds: float
    strays: int = 0  # processes of the job still running a second after the launcher ended
    tag: str = ""  # SCRATCHPAR_FUZZ_TAG of the job's processes


def command(ranks: int, args, tmp: Path) -> list[str]:
    """The job's argv: ``mpiexec -n ranks python -m scratchpar.train …`` (no mpiexec for 0)."""
    launcher = [mpiexec(), "-n", str(ranks)] if ranks else []
    return [*launcher, sys.executable, "-m", "scratchpar.train",
            *(a.replace("{tmp}", str(tmp)) for a in args)]


def launch(cmd: list[str], cwd: Path, timeout: float = TIMEOUT_S) -> Result:
    """Run ``cmd`` in ``cwd`` under the limits; kill every process of the job on timeout."""
    tag = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "HYDRA_", "OMPI_"))}
    env.update(mpi_env(), **ENV, SCRATCHPAR_FUZZ_TAG=tag)
    start = time.perf_counter()
    with open(cwd / ".stdout", "w+", errors="replace") as out, \
            open(cwd / ".stderr", "w+", errors="replace") as err:
        job = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=err, start_new_session=True, preexec_fn=_limits)
        try:
            returncode = job.wait(timeout)
        except subprocess.TimeoutExpired:
            returncode = None
        seconds = time.perf_counter() - start
        strays = 0 if returncode is None else _outliving(tag, grace=1.0)
        kill_tagged(tag, job)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if cmd[0] == mpiexec():  # the job's own lines, as run_mpi gives them
        stdout, stderr = own_lines(stdout), own_lines(stderr)
    return Result(cmd, cwd, returncode, stdout, stderr, seconds, strays, tag)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def tagged(tag: str) -> list[int]:
    """PIDs whose environment carries ``SCRATCHPAR_FUZZ_TAG=tag``."""
    marker, found = f"SCRATCHPAR_FUZZ_TAG={tag}".encode(), []
    for entry in os.scandir("/proc"):
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as environ:
                if marker in environ.read().split(b"\0"):
                    found.append(int(entry.name))
        except OSError:  # not a process, gone, or not ours
            pass
    return found


def _outliving(tag: str, grace: float) -> int:
    """How many processes of an ended job are still running after ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(tagged(tag))


def kill_tagged(tag: str, job: subprocess.Popen) -> None:
    """SIGKILL every process of the job by PID until none is left, then its group."""
    for _ in range(100):
        left = tagged(tag)
        if not left:
            break
        for pid in left:
            _kill(lambda pid=pid: os.kill(pid, signal.SIGKILL))
        time.sleep(0.02)
    _kill(lambda: os.killpg(job.pid, signal.SIGKILL))
    job.wait()


def _kill(action) -> None:
    try:
        action()
    except (ProcessLookupError, PermissionError):
        pass


def judge(r: Result, trains: bool = True) -> list[str]:
    """What is wrong with a finished job; empty when it kept the contract. Without ``trains``
    (``--print-config``), an exit 0 prints the config and no final line."""
    problems = []
    if r.returncode is None:
        problems.append(f"still running after {r.seconds:.0f} s: killed")
    elif r.returncode not in EXITS:
        problems.append(f"exit {r.returncode}, not one of {EXITS}")
    if "Traceback" in r.stdout + r.stderr:
        problems.append("a traceback")
    problems += _repeated((r.stdout + "\n" + r.stderr).splitlines())[:3]
    if r.returncode in (2, 3) and "\nscratchpar.train: " not in "\n" + r.stderr:
        problems.append(f"exit {r.returncode} without a 'scratchpar.train:' message on stderr")
    finals = sum(line.startswith("final: ") for line in r.stdout.splitlines())
    if r.returncode == 0 and finals != int(trains):
        problems.append(f"exit 0 with {finals} 'final:' lines on stdout")
    if r.returncode == 0 and not trains and not r.stdout.startswith("[model]"):
        problems.append("--print-config exited 0 without printing the config")
    if r.strays:
        problems.append(f"{r.strays} processes still running after the launcher ended")
    return problems


def _repeated(lines: list[str]) -> list[str]:
    """Lines printed twice, or twice but for their numbers (once per rank, each with its own
    figures); progress bars, blank lines and the launcher's banner aside."""
    seen, found = {}, []  # each line with its numbers blanked → the line as first printed
    for line in lines:
        if line.strip() and not PROGRESS.search(line) and not LAUNCHER.match(line):
            key = NUMBER.sub("#", line)
            if key in seen:
                found.append(f"printed twice: {line[:200]!r}" if seen[key] == line else
                             f"printed twice but for its numbers: {seen[key][:200]!r}, "
                             f"{line[:200]!r}")
            seen.setdefault(key, line)
    return found


def prepare(root: Path, names=tuple(PREPARED)) -> dict[str, Path]:
    """The checkpoints that resume cases start from: each config stopped at step 3 of 6."""
    made = {}
    for name in names:
        ranks, flags = PREPARED[name]
        ck = root / name
        work = root / f"{name}.run"
        work.mkdir()
        r = launch(command(ranks, [*flags, "--stop-after", "3", "--save", str(ck),
                                   "--metrics", str(work / "m.jsonl")], work), work)
        assert r.returncode == 0 and ck.is_dir(), f"preparing {name} failed:\n{report(r)}"
        made[name] = ck
    return made


def run_case(case, tmp: Path, prepared: dict[str, Path]) -> Result:
    """Lay out the case's files in ``tmp`` (a fresh folder) and run it."""
    rnd = random.Random(case.salt)
    populate(tmp, rnd)
    if case.checkpoint:
        ck = Path(CHECKPOINT.replace("{tmp}", str(tmp)))
        shutil.copytree(prepared[case.checkpoint], ck)
        if case.corruption:
            CORRUPTIONS[case.corruption](ck, rnd)
    return launch(command(case.ranks, case.args, tmp), tmp)


def check(case, tmp: Path, prepared: dict[str, Path]) -> None:
    """Run ``case``; an AssertionError says what broke and how to run it again."""
    r = run_case(case, tmp, prepared)
    problems = judge(r, trains="--print-config" not in case.args)
    assert not problems, (f"fuzz case {case.index} of seed {case.seed} ({case.id}): "
                          f"{'; '.join(problems)}\n{report(r)}\nagain, with its files: "
                          f"{sys.executable} tests/launch/fuzz_run.py {case.seed} {case.index}")


def report(r: Result) -> str:
    """The job's command line, runnable in a shell, and the tails of its output."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**mpi_env(), **ENV}.items())
    return (f"(cd {shlex.quote(str(r.cwd))} && ulimit -v {LIMIT_AS >> 10} && {env} "
            f"{shlex.join(r.command)})\nexit {r.returncode} after {r.seconds:.1f} s\n"
            f"--- stdout ---\n{r.stdout[-2000:]}\n--- stderr ---\n{r.stderr[-4000:]}")


def main(seed: int, indices: list[int]) -> int:
    root = Path(tempfile.mkdtemp(prefix="scratchpar-fuzz-"))
    chosen = [make_case(seed, i) for i in indices]
    prepared = prepare(root, sorted({c.checkpoint for c in chosen if c.checkpoint}))
    failed = 0
    for case in chosen:
        tmp = root / f"case-{case.index:03d}"
        tmp.mkdir()
        r = run_case(case, tmp, prepared)
        problems = judge(r, trains="--print-config" not in case.args)
        failed += bool(problems)
        print(f"{case.id}: {'; '.join(problems) or 'ok'}\n{report(r)}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), [int(i) for i in sys.argv[2:]]))
