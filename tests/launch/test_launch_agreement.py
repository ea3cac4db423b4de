"""Under mpiexec, a problem that only some ranks find (their part of a checkpoint) ends every rank
at once with exit 2 and one message naming those ranks, instead of leaving the others waiting;
and every message of a bad start, usage and help included, appears once per job."""

import json
import re
import time

import pytest
from launch_helpers import run_mpi
from test_launch_train import TINY, train

FAST = {"SCRATCHPAR_COMM_TIMEOUT": "30"}  # a hang would show up as a watchdog report


def resume(n: int, checkpoint, *flags: str):
    """Resume ``checkpoint`` on ``n`` ranks: (CompletedProcess, wall seconds)."""
    start = time.perf_counter()
    result = run_mpi(n, ["-m", "scratchpar.train", *TINY, "--resume", str(checkpoint), *flags],
                     timeout=60, env=FAST)
    return result, time.perf_counter() - start


def edit_meta(checkpoint, edit) -> None:
    meta = json.loads((checkpoint / "meta.json").read_text())
    edit(meta)
    (checkpoint / "meta.json").write_text(json.dumps(meta))


def assert_refused_once(result, wall: float, message: str) -> None:
    assert result.returncode == 2, result.stderr
    assert wall < 20, f"{wall:.1f} s: the ranks that found nothing waited"
    assert result.stderr.count(message) == 1, result.stderr
    assert result.stderr.count("scratchpar.train:") == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "final:" not in result.stdout


def test_a_dropout_stream_edited_for_one_rank_ends_every_rank_with_one_message(tmp_path):
    ck = tmp_path / "ck"
    train(3, "--stop-after", "3", "--save", str(ck), "--metrics", str(tmp_path / "m.jsonl"))
    edit_meta(ck, lambda meta: meta["dropout_rng"].__setitem__(1, "edited"))
    result, wall = resume(3, ck, "--metrics", str(tmp_path / "m.jsonl"))
    assert_refused_once(result, wall, f"scratchpar.train: rank 1 of 3: {ck} does not fit this run")


def test_a_local_sgd_checkpoint_missing_one_replicas_optimizer_ends_every_rank(tmp_path):
    ck, flags = tmp_path / "ck", ["--strategy", "local-sgd", "--local-sgd-every", "4",
                                  "--metrics", str(tmp_path / "m.jsonl")]
    train(3, *flags, "--stop-after", "3", "--save", str(ck))
    edit_meta(ck, lambda meta: [meta[key].pop("rank2.optim") for key in ("arrays", "scalars")])
    result, wall = resume(3, ck, *flags)
    assert_refused_once(result, wall, f"scratchpar.train: rank 2 of 3: {ck} does not fit this "
                                      "run: 'rank2.optim'")


def test_a_bad_flag_is_reported_once_without_the_usage(tmp_path):
    result = run_mpi(3, ["-m", "scratchpar.train", "--bogus"], timeout=60, env=FAST)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "scratchpar.train: invalid configuration:",
        "  - unrecognized arguments: --bogus (python -m scratchpar.train --help lists the flags)"]


def test_help_is_printed_once(tmp_path):
    result = run_mpi(3, ["-m", "scratchpar.train", "--help"], timeout=60, env=FAST)
    assert result.returncode == 0
    assert result.stdout.count("usage: python -m scratchpar.train") == 1
    assert result.stdout.count("stop (exit 3) after this many steps") == 1


def test_divergence_ends_every_rank_with_exit_3_and_one_message(tmp_path):
    # float32: in TINY's float64 the same run stays finite, its loss ~1e12
    result = run_mpi(2, ["-m", "scratchpar.train", *TINY, "--dtype", "float32", "--lr", "1e6",
                         "--steps", "40", "--metrics", str(tmp_path / "m.jsonl")],
                     timeout=60, env=FAST)
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("scratchpar.train: training diverged") == 1, result.stderr
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr


@pytest.mark.parametrize("strategy", [["ps", "--ps-mode", "async"], ["hogwild"],
                                      ["easgd", "--easgd-mode", "async"]])
def test_ranks_that_diverge_alone_report_once_and_end_the_job(tmp_path, strategy):
    """Every worker diverges at its first or second step: the first to claim the report says
    it, and MPI_Abort's own lines do not follow."""
    result = run_mpi(3, ["-m", "scratchpar.train", "--strategy", *strategy, "--steps", "6",
                         "--lr", "1e30", "--grad-clip", "0", "--max-bad-steps", "1",
                         "--d-model", "16", "--n-heads", "2", "--seq-len", "16",
                         "--batch-size", "8", "--no-progress", "--metrics",
                         str(tmp_path / "m.jsonl")], timeout=60, env=FAST)
    assert result.returncode == 3, result.stderr
    said = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(said) == 1, result.stderr
    assert re.match(r"scratchpar\.train: rank \d: training diverged: step \d \(--max-bad-steps "
                    r"1\)", said[0]), said[0]
