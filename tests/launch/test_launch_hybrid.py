"""``mpiexec -n 4 python -m scratchpar.train --strategy hybrid``: dp × pp × cp × tp meshes train
as one device does (with dropout too, where a tp group shares one stream), checkpoints reshard
between meshes and cp sizes, dp = pp = tp = 2 runs at 8 ranks, and a split that cannot work is
refused."""

import numpy as np
import pytest
from launch_helpers import run_mpi
from test_launch_train import TINY, assert_same_model, one_device, records

SPLITTABLE = ["--n-heads", "4", "--vocab-size", "12", "--n-layers", "2", "--batch-size", "8"]
MESHES = {"tp4": ["--tp", "4"], "pp2tp2": ["--dp", "1", "--pp", "2", "--tp", "2"],
          "dp2tp2-sp": ["--dp", "2", "--tp", "2", "--sequence-parallel"],
          "dp2pp2": ["--dp", "2", "--pp", "2", "--pp-schedule", "gpipe"]}


def hybrid(n: int, tmp_path, *flags: str, timeout: float = 120, run: str = "m"):
    metrics = tmp_path / f"{run}.jsonl"
    out = run_mpi(n, ["-m", "scratchpar.train", *TINY, *SPLITTABLE, "--strategy", "hybrid",
                      "--metrics", str(metrics), *flags], timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out, [r["loss"] for r in records(metrics) if r["event"] == "step"]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    return one_device(tmp_path_factory.mktemp("single"), *SPLITTABLE)


@pytest.mark.parametrize("mesh", MESHES)
def test_a_mesh_trains_as_one_device(tmp_path, single, mesh):
    out, losses = hybrid(4, tmp_path, *MESHES[mesh], "--save", str(tmp_path / "ck"))
    assert out.stdout.count("final: step 6") == 1, out.stdout
    want, params = single
    np.testing.assert_allclose(losses, want, rtol=1e-9)
    assert_same_model(tmp_path / "ck", params)  # whole tensors, gathered from every shard


def test_dropout_inside_a_tp_group_equals_one_device_fed_the_same_stream(tmp_path):
    """Every rank of a tp group draws the whole mask from one stream and keeps its slice (heads,
    or sequence shards), so tp = 4 with dropout is one device with dropout, step for step (one
    micro-batch: micro-batches would draw their masks in another order than the whole batch)."""
    want, params = one_device(tmp_path, *SPLITTABLE, "--dropout", "0.2")
    for flags in (["--tp", "4", "--microbatches", "1"],
                  ["--tp", "4", "--microbatches", "1", "--sequence-parallel"]):
        _, losses = hybrid(4, tmp_path, *flags, "--dropout", "0.2", "--save", str(tmp_path / "c"),
                           run="-".join(flags))
        np.testing.assert_allclose(losses, want, rtol=1e-9)
        assert_same_model(tmp_path / "c", params)


def test_a_checkpoint_reshards_between_meshes_and_one_device(tmp_path, single):
    """Stop at pp = 2 × tp = 2, resume at tp = 4; stop at tp = 4, resume at one rank's dp."""
    want, params = single
    ck = tmp_path / "ck"
    hybrid(4, tmp_path, *MESHES["pp2tp2"], "--stop-after", "3", "--save", str(ck))
    _, losses = hybrid(4, tmp_path, "--tp", "4", "--resume", str(ck), "--stop-after", "5",
                       "--save", str(ck), run="resumed")
    np.testing.assert_allclose(losses, want[3:5], rtol=1e-9)
    metrics = tmp_path / "dp.jsonl"
    out = run_mpi(1, ["-m", "scratchpar.train", *TINY, *SPLITTABLE, "--strategy", "dp",
                      "--resume", str(ck), "--save", str(ck), "--metrics", str(metrics)],
                  timeout=90)
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose([r["loss"] for r in records(metrics) if r["event"] == "step"],
                               want[5:], rtol=1e-9)
    assert_same_model(ck, params)


def test_a_cp_run_trains_as_one_device_and_resumes_at_another_cp(tmp_path):
    """cp = 4 (ring, zig-zag) stops at step 2, ZeRO-3 over dp = 2 × cp = 2 resumes to step 4,
    tp = 2 × cp = 2 (Ulysses) to step 5, one device ends the run: every step's loss and the
    final model are one device's."""
    long = ["--seq-len", "16"]  # zig-zag over 4 ranks cuts it into 8 chunks
    want, params = one_device(tmp_path, *SPLITTABLE, *long)
    ck = tmp_path / "ck"
    _, losses = hybrid(4, tmp_path, *long, "--cp", "4", "--stop-after", "2", "--save", str(ck))
    np.testing.assert_allclose(losses, want[:2], rtol=1e-9)
    metrics = tmp_path / "zero.jsonl"
    out = run_mpi(4, ["-m", "scratchpar.train", *TINY, *SPLITTABLE, *long, "--strategy", "zero",
                      "--zero-stage", "3", "--cp", "2", "--resume", str(ck), "--stop-after", "4",
                      "--save", str(ck), "--metrics", str(metrics)], timeout=120)
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose([r["loss"] for r in records(metrics) if r["event"] == "step"],
                               want[2:4], rtol=1e-9)
    _, losses = hybrid(4, tmp_path, *long, "--tp", "2", "--cp", "2", "--cp-attention", "ulysses",
                       "--resume", str(ck), "--stop-after", "5", "--save", str(ck), run="cp2")
    np.testing.assert_allclose(losses, want[4:5], rtol=1e-9)
    metrics = tmp_path / "last.jsonl"
    out = run_mpi(1, ["-m", "scratchpar.train", *TINY, *SPLITTABLE, *long, "--strategy",
                      "single", "--resume", str(ck), "--save", str(ck), "--metrics",
                      str(metrics)], timeout=90)
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose([r["loss"] for r in records(metrics) if r["event"] == "step"],
                               want[5:], rtol=1e-9)
    assert_same_model(ck, params)


def test_dp_pp_tp_of_two_each_on_eight_ranks_trains_as_one_device(tmp_path, single):
    want, params = single
    _, losses = hybrid(8, tmp_path, "--dp", "2", "--pp", "2", "--tp", "2", "--save",
                       str(tmp_path / "ck"), timeout=240)
    np.testing.assert_allclose(losses, want, rtol=1e-9)
    assert_same_model(tmp_path / "ck", params)


def test_a_split_that_cannot_work_is_refused_before_any_message(tmp_path):
    out = run_mpi(4, ["-m", "scratchpar.train", *TINY, "--strategy", "hybrid", "--tp", "4",
                      "--n-heads", "2", "--vocab-size", "10", "--pp", "2",
                      "--metrics", str(tmp_path / "m.jsonl")], timeout=60)
    assert out.returncode == 2, out.stderr
    for reason in ("--pp 2 × --tp 4 does not divide",
                   "--tp 4 must divide --n-heads (2)", "--tp 4 must divide --vocab-size"):
        assert out.stderr.count(reason) == 1, out.stderr  # rank 0 alone, each reason once
