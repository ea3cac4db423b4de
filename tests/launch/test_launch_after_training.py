"""After a run on text at 2 ranks: it resumes from its checkpoint alone, the checkpoint samples
and evaluates on one device whatever strategy wrote it, and the loss reads in bits per
character."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch_helpers import ROOT, run_mpi

from scratchpar.jobs.launcher import mpi_env, mpiexec, open_mpi
from scratchpar.train import load_checkpoint

MODEL = ["--d-model", "16", "--n-heads", "2", "--n-layers", "2", "--seq-len", "16",
         "--batch-size", "8", "--eval-batches", "2", "--no-progress", "--dtype", "float64"]
# A plain process, outside mpiexec, in an environment of its own. It has a home: the engine's
# strategies import comm/, so MPI starts as a singleton, and Open MPI's singleton will not
# start without one ("Unable to get the user home directory").
PLAIN = {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HOME": str(Path.home())}
LINES = ["the quick brown fox jumps over the lazy dog", "pack my box with five dozen jugs",
         "how vexingly quick daft zebras jump", "sphinx of black quartz, judge my vow"]


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "pangrams.txt"
    path.write_text("\n".join(LINES * 20) + "\n")
    return path


def run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=PLAIN)


def train(n: int, *flags: str) -> subprocess.CompletedProcess:
    done = run_mpi(n, ["-m", "scratchpar.train", *flags], timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def final_loss(stdout: str) -> float:
    return float(re.search(r"held-out loss (\S+) nats/token", stdout)[1])


def test_a_run_on_text_resumes_from_its_checkpoint_alone(tmp_path, text):
    ck = tmp_path / "ck"
    common = [*MODEL, "--data", str(text), "--steps", "8"]
    straight = train(2, *common, "--metrics", str(tmp_path / "a.jsonl"))
    train(2, *common, "--stop-after", "4", "--save", str(ck), "--metrics",
          str(tmp_path / "b.jsonl"))
    resumed = train(2, "--resume", str(ck))
    assert "final: step 8" in resumed.stdout and "4 steps in" in resumed.stdout
    assert final_loss(resumed.stdout) == final_loss(straight.stdout)
    loss = final_loss(straight.stdout)
    bits = float(re.search(r"= (\S+) bits/char", straight.stdout)[1])
    assert bits == pytest.approx(loss / math.log(2), abs=1e-4)


@pytest.mark.parametrize("strategy", [["--strategy", "dp"],
                                      ["--strategy", "pipeline", "--pp", "2"]])
def test_any_strategys_checkpoint_samples_and_evaluates_on_one_device(tmp_path, text, strategy):
    ck = tmp_path / "ck"
    done = train(2, *MODEL, *strategy, "--data", str(text), "--steps", "6", "--save", str(ck),
                 "--metrics", str(tmp_path / "m.jsonl"))
    scored = run("scratchpar.evaluate", str(ck))
    assert scored.returncode == 0, scored.stderr
    assert f"held-out loss {final_loss(done.stdout):.4f} nats/token" in scored.stdout
    assert "bits/char" in scored.stdout and "(step 6) on" in scored.stdout

    sampled = run("scratchpar.sample", str(ck), "--prompt", "the ", "--tokens", "40",
                  "--seed", "3")
    assert sampled.returncode == 0, sampled.stderr
    assert sampled.stdout.startswith("the ") and len(sampled.stdout) == len("the ") + 40
    assert set(sampled.stdout) <= set("".join(LINES) + "\n")
    assert "40 tokens in" in sampled.stderr and "keys and values cached" in sampled.stderr
    again = run("scratchpar.sample", str(ck), "--prompt", "the ", "--tokens", "40", "--seed", "3")
    assert again.stdout == sampled.stdout
    other = run("scratchpar.sample", str(ck), "--prompt", "the ", "--tokens", "40", "--seed", "4")
    assert other.stdout != sampled.stdout


def test_bad_inputs_to_sample_and_evaluate_end_in_one_line(tmp_path, text):
    ck = tmp_path / "ck"
    train(1, *MODEL, "--model", "lstm", "--data", str(text), "--steps", "2", "--save", str(ck),
          "--metrics", str(tmp_path / "m.jsonl"))
    (tmp_path / "other.txt").write_text("QUICK BROWN FOX " * 10)
    for module, args, said in (
            ("scratchpar.sample", [str(ck), "--prompt", "ZZ"],
             "--prompt: character 'Z' is not in the vocabulary"),
            ("scratchpar.sample", [str(ck), "--top-k", "0", "--tokens", "-1"],
             "--tokens must be at least 0, got -1; --top-k must be at least 1, got 0"),
            ("scratchpar.sample", [str(tmp_path / "none")], "no such directory"),
            ("scratchpar.evaluate", [str(ck), "--data", str(tmp_path / "other.txt")],
             "characters outside the model's vocabulary of"),
            ("scratchpar.evaluate", [str(ck), "--batches", "0"], "--batches must be at least 1")):
        done = run(module, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    sampled = run("scratchpar.sample", str(ck), "--tokens", "5", "--temperature", "0")
    assert sampled.returncode == 0 and "each layer's state carried" in sampled.stderr


def interrupt(cmd: list[str], metrics, steps: int = 3) -> subprocess.CompletedProcess:
    """Start ``cmd``, wait until the metrics file holds ``steps`` steps, send SIGINT (Ctrl-C)
    to the launcher, and return what it printed and its exit status."""
    job = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True,
                           env={**os.environ, **mpi_env(), "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and job.poll() is None:
        if metrics.exists() and metrics.read_text().count('"event": "step"') >= steps:
            break
        time.sleep(0.05)
    job.send_signal(signal.SIGINT)
    try:
        out, err = job.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        raise AssertionError(f"{cmd} still running 30 s after Ctrl-C") from None
    return subprocess.CompletedProcess(cmd, job.returncode, out, err)


@pytest.mark.parametrize("ranks", [None, 4])
def test_ctrl_c_ends_every_rank_with_one_line_and_the_last_checkpoint_intact(tmp_path, ranks):
    """Open MPI's launcher answers Ctrl-C by ending the ranks itself and forwards nothing they
    print after it (docs/mpi.md): there the job must end, its checkpoint intact."""
    metrics, ck = tmp_path / "m.jsonl", tmp_path / "ck"
    train = [sys.executable, "-m", "scratchpar.train", *MODEL, "--steps", "100000",
             "--log-every", "1", "--save", str(ck), "--save-every", "2", "--metrics",
             str(metrics)]
    done = interrupt(train if ranks is None else [mpiexec(), "-n", str(ranks), *train], metrics)
    if ranks is not None and open_mpi():
        assert done.returncode != 0 and load_checkpoint(ck)[1]["step"] >= 2
        return
    assert done.returncode == 130, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("scratchpar")]
    assert len(said) == 1, done.stderr
    assert "Traceback" not in done.stderr and "Abort" not in done.stderr + done.stdout
    stopped = re.fullmatch(r"scratchpar\.train: interrupted at step (\d+) of 100000; the "
                           rf"checkpoint in {re.escape(str(ck))} \(step (\d+)\) is intact: "
                           rf"--resume {re.escape(str(ck))} continues from it", said[0])
    assert stopped, said[0]
    arrays, meta = load_checkpoint(ck)
    assert meta["step"] == int(stopped[2]) >= 2 and int(stopped[1]) - meta["step"] <= 2
    assert json.loads(metrics.read_text().splitlines()[-1]) == {
        "event": "interrupted", "step": int(stopped[1])}


def test_without_a_terminal_progress_is_a_plain_line_per_tenth_of_the_run(tmp_path):
    done = train(2, *MODEL, "--progress", "--steps", "40", "--log-every", "4", "--metrics",
                 str(tmp_path / "m.jsonl"))
    assert "\r" not in done.stderr
    lines = done.stderr.splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"step {4 * k}/40" for k in range(1, 11)]
    assert "· loss " in lines[-1] and "tok/s" in lines[-1] and "to go" in lines[0]


def test_a_moved_checkpoint_samples_without_its_text_and_evaluates_given_it(tmp_path, text):
    ck = tmp_path / "ck"
    trained = subprocess.run(  # from the text's folder, the path relative to it
        [sys.executable, "-m", "scratchpar.train", *MODEL, "--data", text.name, "--steps", "2",
         "--save", str(ck), "--metrics", str(tmp_path / "m.jsonl")], cwd=text.parent,
        capture_output=True, text=True, timeout=120, env=PLAIN)
    assert trained.returncode == 0, trained.stderr
    sampled = run("scratchpar.sample", str(ck), "--tokens", "5")
    assert sampled.returncode == 0 and len(sampled.stdout) == 1 + 5, sampled.stderr
    lost = run("scratchpar.evaluate", str(ck))
    assert lost.returncode == 2 and "was trained on pangrams.txt, which is not there from " \
        "this folder: give the text with --data PATH" in lost.stderr
    assert run("scratchpar.evaluate", str(ck), "--data", str(text)).returncode == 0
