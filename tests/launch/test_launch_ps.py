"""``mpiexec -n 4 python -m scratchpar.train --strategy ps``: the synchronous parameter server
trains as one device does with one or two servers, its checkpoints hold the whole model, and
runs move between parameter servers and data parallelism halfway."""

import numpy as np
import pytest
from launch_helpers import run_mpi
from test_launch_train import TINY, assert_same_model, one_device, records

BATCH = ["--batch-size", "6"]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    return one_device(tmp_path_factory.mktemp("single"), *BATCH)


def train(n: int, tmp_path, name: str, *flags: str):
    metrics = tmp_path / f"{name}.jsonl"
    out = run_mpi(n, ["-m", "scratchpar.train", *TINY, *BATCH, "--metrics", str(metrics),
                      *flags], timeout=90)
    assert out.returncode == 0, out.stderr
    return out, [r["loss"] for r in records(metrics) if r["event"] == "step"]


@pytest.mark.parametrize("servers", ["1", "2"])
def test_the_synchronous_parameter_server_trains_as_one_device(tmp_path, single, servers):
    out, losses = train(4, tmp_path, "ps", "--strategy", "ps", "--servers", servers,
                        "--save", str(tmp_path / "ck"))
    assert out.stdout.count("final: step 6") == 1, out.stdout
    assert "their optimizer state live on the host of rank" in out.stdout, out.stdout
    want, params = single
    np.testing.assert_allclose(losses, want, rtol=1e-9)
    assert_same_model(tmp_path / "ck", params)


def test_checkpoints_move_between_parameter_servers_and_data_parallelism(tmp_path, single):
    want, params = single
    for first, second, n in ((["--strategy", "ps", "--servers", "2"], ["--strategy", "dp"], 2),
                             (["--strategy", "dp"], ["--strategy", "ps"], 3)):
        ck = tmp_path / f"ck{n}"
        train(4, tmp_path, f"first{n}", *first, "--stop-after", "3", "--save", str(ck))
        _, losses = train(n, tmp_path, f"second{n}", *second, "--resume", str(ck),
                          "--save", str(ck))
        np.testing.assert_allclose(losses, want[3:], rtol=1e-9)
        assert_same_model(ck, params)


def test_a_parameter_server_without_a_worker_is_refused(tmp_path):
    out = run_mpi(2, ["-m", "scratchpar.train", *TINY, "--strategy", "ps", "--servers", "2",
                      "--metrics", str(tmp_path / "m.jsonl")], timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("--servers 2 on 2 rank(s)") == 1, out.stderr
