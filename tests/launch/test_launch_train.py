"""``mpiexec -n 2 python -m scratchpar.train``: rank 0 alone reports, data parallelism trains as
one device does, checkpoints move between world sizes, local SGD resumes every replica, and a bad
config ends every rank."""

import json

import numpy as np
import pytest
from launch_helpers import run_mpi

from scratchpar.train import build_trainer, load_checkpoint, load_config

TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--seq-len", "12",
        "--vocab-size", "10", "--order", "1", "--mean-length", "6", "--steps", "6",
        "--warmup", "1", "--batch-size", "5", "--eval-batches", "1", "--log-every", "1",
        "--dtype", "float64", "--dropout", "0", "--no-progress"]


def train(n: int, *flags: str):
    """``python -m scratchpar.train`` on ``n`` ranks; asserts that it succeeded."""
    result = run_mpi(n, ["-m", "scratchpar.train", *TINY, *flags], timeout=90)
    assert result.returncode == 0, result.stderr
    return result


def records(path) -> list[dict]:
    return [json.loads(line) for line in open(path)]


def one_device(tmp_path, *flags: str):
    """The same run in this process on one device: (step losses, final parameters)."""
    metrics = tmp_path / "single.jsonl"
    trainer = build_trainer(load_config([*TINY, "--strategy", "single", "--metrics",
                                         str(metrics), *flags]))
    trainer.run()
    params = {k: np.array(v) for k, v in trainer.strategy.model.state_dict().items()}
    return [r["loss"] for r in records(metrics) if r["event"] == "step"], params


def assert_same_model(checkpoint, params):
    saved = load_checkpoint(checkpoint)[0]["model"]
    assert saved.keys() == params.keys()
    for name, value in params.items():
        np.testing.assert_allclose(saved[name], value, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("strategy", ["dp", "dp-naive"])
def test_two_ranks_train_as_one_device_and_rank_0_alone_reports(tmp_path, strategy):
    metrics, ck = tmp_path / "m.jsonl", tmp_path / "ck"
    out = train(2, "--strategy", strategy, "--metrics", str(metrics), "--save", str(ck),
                "--noise-scale")  # it measures, and changes nothing of the run
    assert out.stdout.count("final: step 6") == 1, out.stdout
    assert "per rank × 2" in out.stdout
    log = records(metrics)  # two writers would repeat or interleave the records
    assert [r["event"] for r in log] == ["start"] + ["step"] * 6 + ["final"]
    assert log[0]["world"] == 2 and log[-1]["world"] == 2
    steps = log[1:-1]
    assert [r["step"] for r in steps] == [1, 2, 3, 4, 5, 6]
    assert all(r["tok_per_s_per_rank"] == pytest.approx(r["tok_per_s"] / 2) for r in steps)
    assert all(isinstance(r["gradient_trace"], float) and r["gradient_trace"] > 0
               for r in steps)  # 5 rows on 2 ranks: each step tells noise from signal
    want, params = one_device(tmp_path)
    np.testing.assert_allclose([r["loss"] for r in steps], want, rtol=1e-9)
    assert_same_model(ck, params)


def test_resuming_at_another_world_size_continues_the_same_run(tmp_path):
    _, params = one_device(tmp_path)
    # two ranks stop at step 3; one device finishes the run
    train(2, "--stop-after", "3", "--save", str(tmp_path / "a"), "--metrics",
          str(tmp_path / "a.jsonl"))
    resumed = build_trainer(load_config([*TINY, "--resume", str(tmp_path / "a"), "--metrics",
                                         str(tmp_path / "a.jsonl")]))
    resumed.run()
    assert resumed.step == 6
    for name, value in params.items():
        np.testing.assert_allclose(np.array(resumed.strategy.model.state_dict()[name]), value,
                                   rtol=1e-9, atol=1e-10)
    # one device stops at step 3; two ranks finish the run
    build_trainer(load_config([*TINY, "--stop-after", "3", "--save", str(tmp_path / "b"),
                               "--metrics", str(tmp_path / "b.jsonl")])).run()
    out = train(2, "--resume", str(tmp_path / "b"), "--save", str(tmp_path / "b"),
                "--metrics", str(tmp_path / "b.jsonl"))
    assert out.stdout.count("final: step 6") == 1 and "3 steps in" in out.stdout
    assert_same_model(tmp_path / "b", params)


def test_local_sgd_resumed_between_averaging_points_ends_as_the_uninterrupted_run(tmp_path):
    flags = ["--strategy", "local-sgd", "--local-sgd-every", "4", "--metrics",
             str(tmp_path / "m.jsonl")]
    train(2, *flags, "--save", str(tmp_path / "straight"))
    train(2, *flags, "--stop-after", "3", "--save", str(tmp_path / "resumed"))
    mid = load_checkpoint(tmp_path / "resumed")[0]
    assert {"rank1.model", "rank1.optim"} <= mid.keys()  # the replicas differ at step 3
    train(2, *flags, "--resume", str(tmp_path / "resumed"), "--save", str(tmp_path / "resumed"))
    want, got = (load_checkpoint(tmp_path / name)[0] for name in ("straight", "resumed"))
    assert got.keys() == want.keys() and "rank1.optim" in got
    for part, named in want.items():
        assert got[part].keys() == named.keys()
        for name, value in named.items():
            assert got[part][name].tobytes() == value.tobytes(), (part, name)


def test_a_config_invalid_for_this_world_ends_every_rank_with_exit_2(tmp_path):
    result = run_mpi(2, ["-m", "scratchpar.train", *TINY, "--strategy", "single",
                         "--batch-size", "1", "--metrics", str(tmp_path / "m.jsonl")],
                     timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("--strategy single runs on one rank; launched on 2") == 1
    assert result.stderr.count("--batch-size (1) must be at least the number of ranks") == 1
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "m.jsonl").exists()
