"""The command line end to end, as a user runs it: help, a bad config, a tiny run."""

import importlib.util
import json
import os
import subprocess
import sys


def run_cli(*args, timeout=120, env=None):
    return subprocess.run([sys.executable, "-m", "scratchpar.train", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_help_lists_every_section():
    out = run_cli("--help")
    assert out.returncode == 0
    for flag in ("--model", "--data", "--lr", "--steps", "--save", "--resume", "--config",
                 "--strategy", "--device"):
        assert flag in out.stdout


def test_bad_config_exits_2_with_every_problem_and_no_traceback():
    out = run_cli("--n-heads", "5", "--batch-size", "0", "--optimizer", "adamw", "--lr", "0")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "--n-heads (5) must divide" in out.stderr
    assert "--batch-size must be at least 1" in out.stderr
    assert "--lr must be positive" in out.stderr


def test_tiny_run_end_to_end(tmp_path):
    metrics = tmp_path / "m.jsonl"
    out = run_cli("--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--seq-len", "12",
                  "--steps", "6", "--warmup", "1", "--batch-size", "4", "--eval-batches", "1",
                  "--no-progress", "--metrics", str(metrics), "--save", str(tmp_path / "ck"))
    assert out.returncode == 0, out.stderr
    assert "final: step 6" in out.stdout and "entropy floor" in out.stdout
    assert (tmp_path / "ck" / "meta.json").is_file() and metrics.is_file()
    resumed = run_cli("--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--seq-len", "12",
                      "--steps", "8", "--warmup", "1", "--batch-size", "4", "--eval-batches",
                      "1", "--no-progress", "--metrics", str(metrics), "--resume",
                      str(tmp_path / "ck"))
    assert resumed.returncode == 0, resumed.stderr
    assert "final: step 8" in resumed.stdout and "2 steps in" in resumed.stdout


def test_broken_checkpoint_is_a_clear_error(tmp_path):
    (tmp_path / "ck").mkdir()
    out = run_cli("--resume", str(tmp_path / "ck"), "--no-progress", "--steps", "2",
                  "--warmup", "0", "--metrics", str(tmp_path / "m.jsonl"))
    assert out.returncode == 2
    assert "not a checkpoint" in out.stderr and "Traceback" not in out.stderr


def test_checkpoint_of_another_model_is_a_clear_error(tmp_path):
    common = ("--n-heads", "2", "--n-layers", "1", "--seq-len", "12", "--steps", "2",
              "--warmup", "0", "--batch-size", "2", "--eval-batches", "1", "--no-progress",
              "--metrics", str(tmp_path / "m.jsonl"))
    assert run_cli("--d-model", "16", "--save", str(tmp_path / "ck"), *common).returncode == 0
    out = run_cli("--d-model", "8", "--resume", str(tmp_path / "ck"), *common)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"--d-model 8 contradicts the checkpoint {tmp_path / 'ck'}, trained with " \
           "--d-model 16" in out.stderr
    meta = json.loads((tmp_path / "ck" / "meta.json").read_text())
    del meta["config"]  # as if written without its run's config: the arrays must still fit
    (tmp_path / "ck" / "meta.json").write_text(json.dumps(meta))
    out = run_cli("--d-model", "8", "--resume", str(tmp_path / "ck"), *common)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "does not fit this run" in out.stderr and "shape" in out.stderr


def test_cuda_without_cupy_is_a_clear_error(tmp_path):
    out = run_cli("--device", "cuda", "--steps", "2", "--warmup", "0", "--no-progress",
                  "--metrics", str(tmp_path / "m.jsonl"))
    if importlib.util.find_spec("cupy") is not None:  # a machine with CuPy trains on its GPU
        assert out.returncode == 0 and "final:" in out.stdout, out.stderr
    else:
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert "CuPy" in out.stderr


def test_a_cpu_run_never_loads_cupy(tmp_path):
    """CuPy's CUDA libraries map about 1 GiB of address space, more than a CPU rank held to a
    budget has (``batch fits``): a CPU run must not import it, even where it is installed."""
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text('raise RuntimeError("CuPy was imported")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = run_cli("--steps", "2", "--warmup", "0", "--no-progress",
                  "--metrics", str(tmp_path / "m.jsonl"), env=env)
    assert out.returncode == 0 and "final:" in out.stdout, out.stderr
