"""After a run on text at 2 ranks: it resumes from its checkpoint alone, the checkpoint samples
and evaluates on one device whatever strategy wrote it, and the loss reads in bits per
character."""

import math
import re
import subprocess
import sys

import pytest
from launch_helpers import ROOT, run_mpi

MODEL = ["--d-model", "16", "--n-heads", "2", "--n-layers", "2", "--seq-len", "16",
         "--batch-size", "8", "--eval-batches", "2", "--no-progress", "--dtype", "float64"]
LINES = ["the quick brown fox jumps over the lazy dog", "pack my box with five dozen jugs",
         "how vexingly quick daft zebras jump", "sphinx of black quartz, judge my vow"]


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "pangrams.txt"
    path.write_text("\n".join(LINES * 20) + "\n")
    return path


def run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT),
                                                       "OMP_NUM_THREADS": "1"})


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
