"""``mpiexec -n 2 python -m scratchpar.train --source sparse-logreg|matrix-factorization``: data
parallelism trains as one device does, and the model-agnostic strategies (local SGD, parameter
servers) run them and report the floor."""

import json

import numpy as np
import pytest
from launch_helpers import run_mpi

from scratchpar.train import build_trainer, load_checkpoint, load_config

COMMON = ["--steps", "6", "--warmup", "1", "--batch-size", "7", "--eval-batches", "2",
          "--log-every", "1", "--dtype", "float64", "--lr", "0.05", "--no-progress"]
SOURCES = {"sparse-logreg": ["--source", "sparse-logreg", "--n-features", "40", "--nnz", "5"],
           "matrix-factorization": ["--source", "matrix-factorization", "--n-users", "9",
                                    "--n-items", "6", "--rank", "2"]}


def step_losses(path) -> list[float]:
    return [r["loss"] for r in map(json.loads, open(path)) if r["event"] == "step"]


@pytest.mark.parametrize("strategy", ["dp", "dp-naive"])
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_two_ranks_train_as_one_device(tmp_path, source, strategy):
    flags = [*COMMON, *SOURCES[source]]
    out = run_mpi(2, ["-m", "scratchpar.train", *flags, "--strategy", strategy, "--metrics",
                      str(tmp_path / "dp.jsonl"), "--save", str(tmp_path / "ck")], timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("final: step 6") == 1 and "floor" in out.stdout, out.stdout
    single = build_trainer(load_config([*flags, "--strategy", "single", "--metrics",
                                        str(tmp_path / "one.jsonl")]))
    single.run()
    np.testing.assert_allclose(step_losses(tmp_path / "dp.jsonl"),
                               step_losses(tmp_path / "one.jsonl"), rtol=1e-10)
    saved = load_checkpoint(tmp_path / "ck")[0]["model"]
    for name, value in single.strategy.model.state_dict().items():
        np.testing.assert_allclose(saved[name], value, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_local_sgd_and_parameter_servers_run_them(tmp_path, source):
    for n, strategy in ((2, ["--strategy", "local-sgd", "--local-sgd-every", "2"]),
                        (3, ["--strategy", "ps"])):
        out = run_mpi(n, ["-m", "scratchpar.train", *COMMON, *SOURCES[source], *strategy,
                          "--metrics", str(tmp_path / "m.jsonl")], timeout=90)
        assert out.returncode == 0, out.stderr
        assert out.stdout.count("final: step 6") == 1 and "floor" in out.stdout, out.stdout
