"""``mpiexec -n N python -m scratchpar.train --strategy hogwild|easgd``: one Hogwild worker, and
one EASGD worker with ρ = 0, train as one device does; every window, lock and EASGD mode trains
at 4 ranks and checkpoints; and a worker that raises ends every rank, the parameter server,
the master and the processes sharing its window included."""

import re
import time

import numpy as np
import pytest
from launch_helpers import run_mpi
from test_launch_sparse import COMMON, SOURCES, step_losses

from scratchpar.train import build_trainer, load_checkpoint, load_config

SGD = ["--optimizer", "sgd", "--momentum", "0"]


def train(n: int, tmp_path, name: str, *flags: str):
    out = run_mpi(n, ["-m", "scratchpar.train", *COMMON, *flags, "--metrics",
                      str(tmp_path / f"{name}.jsonl")], timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("final: step") == 1, out.stdout
    return out, step_losses(tmp_path / f"{name}.jsonl")


def one_device(tmp_path, *flags: str):
    single = build_trainer(load_config([*COMMON, *flags, "--strategy", "single", "--metrics",
                                        str(tmp_path / "one.jsonl")]))
    single.run()
    return step_losses(tmp_path / "one.jsonl"), single.strategy.model.state_dict()


@pytest.mark.parametrize("strategy", [["--strategy", "hogwild"],
                                      ["--strategy", "hogwild", "--window", "one-sided"],
                                      ["--strategy", "easgd", "--rho", "0", "--tau", "1"]])
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_one_worker_trains_as_one_device(tmp_path, source, strategy):
    _, losses = train(1, tmp_path, "one", *SOURCES[source], *strategy, "--save",
                      str(tmp_path / "ck"))
    want, params = one_device(tmp_path, *SOURCES[source], *SGD)
    np.testing.assert_allclose(losses, want, rtol=1e-12)
    state = load_checkpoint(tmp_path / "ck")[0]
    saved = state["rank0.model"] if "easgd" in strategy else state["model"]
    for name, value in params.items():
        np.testing.assert_array_equal(saved[name], value)


RUNS = {"hogwild": ["--strategy", "hogwild"],
        "hogwild locked": ["--strategy", "hogwild", "--lock"],
        "hogwild one-sided": ["--strategy", "hogwild", "--window", "one-sided"],
        "easgd sync": ["--strategy", "easgd", "--tau", "2"],
        "eamsgd async": ["--strategy", "easgd", "--easgd-mode", "async", "--momentum", "0.9"],
        "easgd round-robin": ["--strategy", "easgd", "--easgd-mode", "round-robin"]}
SAYS = {"hogwild": "hogwild (lock-free): the parameters live once, in a shared-memory window",
        "hogwild locked": "hogwild (one writer at a time, under an exclusive lock)",
        "hogwild one-sided": "in rank 0's one-sided window (gets and atomic adds)",
        "easgd sync": "exchanging every 2 steps; local optimizer SGD; all 4 ranks are workers",
        "eamsgd async": "local optimizer SGD with Nesterov momentum 0.9 (EAMSGD); rank 0 is the "
                        "master",
        "easgd round-robin": "rank 0 is the CPU master; worker j = t mod 3 takes step t"}


@pytest.mark.parametrize("run", list(RUNS))
def test_every_mode_trains_at_four_ranks_and_resumes(tmp_path, run):
    ck = tmp_path / "ck"
    out, losses = train(4, tmp_path, "first", *SOURCES["sparse-logreg"], *RUNS[run],
                        "--stop-after", "3", "--save", str(ck))
    assert SAYS[run] in out.stdout, out.stdout
    assert len(losses) == 3 and all(np.isfinite(losses))
    saved = load_checkpoint(ck)[0]["model"]
    assert saved["weight"].shape == (40,) and np.all(np.isfinite(saved["weight"]))
    _, rest = train(4, tmp_path, "second", *SOURCES["sparse-logreg"], *RUNS[run], "--resume",
                    str(ck))
    assert len(rest) == 3 and all(np.isfinite(rest))


@pytest.mark.parametrize("mode", ["downpour", "hogwild", "easgd-async", "round-robin"])
def test_a_worker_that_raises_ends_every_rank_within_seconds(mode):
    start = time.perf_counter()
    result = run_mpi(4, ["tests/launch/scripts/launch_worker_raise.py", mode], timeout=30,
                     env={"SCRATCHPAR_COMM_TIMEOUT": "60"})
    wall, err = time.perf_counter() - start, result.stderr
    assert result.returncode != 0 and wall < 10, (wall, err)
    assert "scratchpar: rank 2 of 4 failed outside communication" in err
    assert "ValueError: worker rank 2 breaks in step 4" in err
    assert "scratchpar: rank 2 ends all 4 ranks (MPI_Abort)" in err
    assert "should have been ended" not in result.stdout


def test_a_diverging_hogwild_worker_ends_the_job_with_exit_3(tmp_path):
    result = run_mpi(2, ["-m", "scratchpar.train", *COMMON, *SOURCES["matrix-factorization"],
                         "--strategy", "hogwild", "--lr", "1e30", "--grad-clip", "0",
                         "--dtype", "float32", "--steps", "40", "--metrics",
                         str(tmp_path / "m.jsonl")], timeout=60)
    assert result.returncode == 3, result.stderr
    assert re.search(r"scratchpar.train: rank [01]: training diverged: steps", result.stderr)
