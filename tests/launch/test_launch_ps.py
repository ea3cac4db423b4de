"""``mpiexec -n 4 python -m scratchpar.train --strategy ps``: the synchronous parameter server
trains as one device does with one or two servers, its checkpoints hold the whole model, and
runs move between parameter servers and data parallelism halfway; every asynchronous mode
trains and reports its staleness, a resumed one keeps its clock, and a worker that diverges
ends every rank (one that raises: test_launch_async.py)."""

import re

import numpy as np
import pytest
from launch_helpers import run_mpi
from test_launch_train import TINY, assert_same_model, one_device, records

from scratchpar.train import load_checkpoint

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
    workers = 4 - int(servers)  # the throughput is shared among the ranks that compute
    assert f"per worker × {workers} of 4 ranks)" in out.stdout, out.stdout
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
    assert out.stderr.count("--servers 2 on 2 ranks") == 1, out.stderr


ASYNC = {"locked": ["--ps-mode", "locked"],
         "downpour": ["--ps-mode", "async", "--n-push", "2", "--n-fetch", "3"],
         "ssp": ["--ps-mode", "ssp", "--staleness", "1", "--servers", "2"],
         "warm start": ["--ps-mode", "async", "--warmup-sync", "3"]}


@pytest.mark.parametrize("mode", list(ASYNC))
def test_every_asynchronous_mode_trains_and_reports_its_staleness(tmp_path, mode):
    out, losses = train(4, tmp_path, mode, "--strategy", "ps", *ASYNC[mode])
    assert out.stdout.count("final: step 6") == 1, out.stdout
    report = re.search(r"parameter servers: (\d+) pushes applied, as many as the workers sent, "
                       r"in (\d+) updates · staleness mean [\d.]+, max (\d+)", out.stdout)
    assert report, out.stdout
    pushes, updates, worst = map(int, report.groups())
    workers = 2 if mode == "ssp" else 3  # ssp runs two servers
    assert pushes == workers * (3 if mode == "downpour" else 6)  # Downpour: after 2, 4, 6
    assert updates == {"ssp": 6, "warm start": 3 + 3 * 3}.get(mode, pushes)
    assert worst <= {"locked": 0, "ssp": 1}.get(mode, 99)
    assert len(losses) == 6 and all(np.isfinite(losses))
    final = records(tmp_path / f"{mode}.jsonl")[-1]
    assert final["event"] == "final" and final["strategy"]["pushes"] == pushes


def test_zero_staleness_trains_as_one_device(tmp_path, single):
    _, losses = train(4, tmp_path, "ssp0", "--strategy", "ps", "--ps-mode", "ssp",
                      "--staleness", "0", "--save", str(tmp_path / "ck"))
    want, params = single
    np.testing.assert_allclose(losses, want, rtol=1e-9)
    assert_same_model(tmp_path / "ck", params)


def test_a_resumed_warm_start_keeps_its_clock(tmp_path):
    ck, flags = tmp_path / "ck", ["--strategy", "ps", *ASYNC["warm start"]]
    train(4, tmp_path, "first", *flags, "--stop-after", "2", "--save", str(ck))
    assert load_checkpoint(ck)[1]["ps"] == {"clock": 2}
    out, losses = train(4, tmp_path, "second", *flags, "--resume", str(ck), "--save", str(ck))
    assert len(losses) == 4 and load_checkpoint(ck)[1]["ps"] == {"clock": 6}
    assert "in 10 updates" in out.stdout  # step 2 still synchronous, then 3 workers × 3 steps


def test_a_diverging_worker_ends_the_job_with_exit_3(tmp_path):
    """A worker judges its own loss: its verdict is not shared, so it ends the job itself. The
    server, which counts a clock skipped when no worker's step at it was finite, may get there
    first: whichever rank it is, the job ends with exit 3 and the rank says why."""
    result = run_mpi(3, ["-m", "scratchpar.train", *TINY, "--dtype", "float32", "--lr", "1e6",
                         "--steps", "40", "--strategy", "ps", "--ps-mode", "async",
                         "--metrics", str(tmp_path / "m.jsonl")], timeout=60)
    assert result.returncode == 3, result.stderr
    assert re.search(r"scratchpar.train: rank [012]: training diverged: steps", result.stderr)


def test_the_synchronous_server_resumes_bit_identically(tmp_path):
    flags = ["--strategy", "ps", "--servers", "2"]
    train(4, tmp_path, "straight", *flags, "--save", str(tmp_path / "straight"))
    train(4, tmp_path, "first", *flags, "--stop-after", "3", "--save", str(tmp_path / "resumed"))
    train(4, tmp_path, "second", *flags, "--resume", str(tmp_path / "resumed"),
          "--save", str(tmp_path / "resumed"))
    want, got = (load_checkpoint(tmp_path / name)[0] for name in ("straight", "resumed"))
    for part in ("model", "optim"):
        assert got[part].keys() == want[part].keys()
        for name, value in want[part].items():
            assert got[part][name].tobytes() == value.tobytes(), (part, name)
