"""Faults under real mpiexec: one rank raising, one rank stalling, mismatched collectives, a bad
mesh and a bad CLI flag each end the whole job quickly, non-zero, with a message of our own.

MPICH's launcher adds its "BAD TERMINATION" banner when a job aborts; these tests read the
``scratchpar:`` lines instead. The scripts are in ``tests/launch/scripts``.
"""

import re
import time

from launch_helpers import run_mpi

SCRIPTS = "tests/launch/scripts"


def launch(n: int, script: str, env: dict | None = None, timeout: float = 30):
    """Run ``script`` on ``n`` ranks; returns the CompletedProcess and its wall time in s."""
    start = time.perf_counter()
    result = run_mpi(n, [f"{SCRIPTS}/{script}"], timeout=timeout, env=env)
    return result, time.perf_counter() - start


def test_an_exception_on_one_rank_ends_every_rank_within_seconds():
    result, wall = launch(3, "launch_raise.py", env={"SCRATCHPAR_COMM_TIMEOUT": "60"},
                          timeout=20)
    ended = time.time()
    err = result.stderr
    assert result.returncode != 0
    assert wall < 5, f"the job took {wall:.1f} s to end after rank 1 raised:\n{err}"
    raised = float(re.search(r"rank 1 raises at ([\d.]+)", err).group(1))
    assert ended - raised < 4, f"{ended - raised:.1f} s from the raise to the job's end"
    assert ("scratchpar: rank 1 of 3 failed outside communication (last operation: "
            "all_reduce/recursive_doubling #1 of shape (10,) float64 on world): "
            "ValueError: a bug on rank 1") in err
    assert 'launch_raise.py", line 18' in err  # the traceback
    assert "scratchpar: rank 1 ends all 3 ranks (MPI_Abort)" in err
    assert "rank 1 printed this, unflushed, before it raised" in result.stdout
    assert "should have been ended" not in result.stdout


def test_a_stalled_rank_is_named_by_the_watchdog_and_the_whole_job_ends():
    result, wall = launch(3, "launch_stall.py", env={"SCRATCHPAR_COMM_TIMEOUT": "2"})
    err = result.stderr
    assert result.returncode != 0
    assert 2 < wall < 20, f"{wall:.1f} s: rank 1 sleeps for 600 s unless the abort ends it"
    reports = re.findall(r"scratchpar: rank ([02]) of 3 failed in a communication call "
                         r"\(last operation: broadcast/tree #1 of shape \(10,\) float64 on world\)"
                         r": WaitTimeout: rank \1 waited 2\.\d s on world: broadcast/tree #1 recv "
                         r"of shape \(10,\) float64 from rank 1\. The peer may have stopped", err)
    assert reports, err
    assert "SCRATCHPAR_DEBUG=1" in err and "SCRATCHPAR_COMM_TIMEOUT" in err
    assert "should have been ended" not in result.stdout


def test_debug_mode_turns_mismatched_collectives_into_one_clear_error_on_every_rank():
    result, _ = launch(2, "launch_mismatch.py", env={"SCRATCHPAR_DEBUG": "1",
                                                    "SCRATCHPAR_COMM_TIMEOUT": "20"})
    out, err = result.stdout, result.stderr
    assert result.returncode != 0
    # a collective against a barrier, and against a user's metadata exchange: each rank
    # raises (the script catches and prints), none hangs, and each sees both calls
    for case, calls in enumerate([
        ("debug check of all_reduce(algorithm=auto, op=sum, shape=(3,), dtype=float64)",
         "debug check of barrier()"),
        ("debug check of all_gather(algorithm=ring, shape=(), dtype=float64)",
         "metadata exchange"),
    ]):
        for rank in (0, 1):
            assert f"case {case}, rank {rank} caught: ranks of world called different " \
                   "operations:" in out, out
        for rank, call in enumerate(calls):
            assert out.count(f"  rank {rank}: {call}\n") == 2, out
    # 10 float64 against 20 float32: the same bytes, caught before any message
    assert "CollectiveMismatch: ranks of world called different operations:" in err
    assert "  rank 0: debug check of all_gather(algorithm=ring, shape=(), dtype=float64)" in err
    assert "  rank 1: debug check of all_gather(algorithm=ring, shape=(), dtype=float32)" in err
    assert "received" not in out


def test_without_debug_mode_the_same_mismatch_misreads_and_truncates():
    """What debug mode prevents. Without it the all-gather runs: both ranks agree on the row
    counts (10 and 20) but not the dtype, so rank 1 expects 10 float32 (40 bytes) from rank 0,
    which sends 80: MPI reports a truncated message, and the job ends. Rank 0 expects 20 float64
    (160 bytes) from rank 1, gets 80, and raises nothing: it reads the float32 bits as float64
    and half its buffer is never written (it prints that garbage if it gets there first)."""
    result, _ = launch(2, "launch_mismatch.py", env={"SCRATCHPAR_COMM_TIMEOUT": "20"})
    err = result.stderr
    assert result.returncode != 0
    assert "scratchpar: rank 1 of 2 failed in a communication call (last operation: " \
           "all_gather/ring #2 of shape (20,) float32 on world): MessageError" in err
    assert "all_gather/ring #2 recv of shape (10,) float32 from rank 0: Message truncated" in err
    assert "CollectiveMismatch" not in err


def test_a_mesh_that_does_not_fit_the_world_is_a_clear_error():
    result, _ = launch(2, "launch_bad_mesh.py")
    assert result.returncode != 0
    assert "MeshError: Mesh(dp=3, pp=1, tp=1) cannot be laid out on a world of 2 ranks" \
           in result.stderr
    assert "dp·pp·tp = 3·1·1 = 3 ranks, the world has 2" in result.stderr
    assert "cannot exist" not in result.stdout


def test_the_training_cli_rejects_a_bad_flag_on_every_rank():
    start = time.perf_counter()
    result = run_mpi(2, ["-m", "scratchpar.train", "--n-heads", "5", "--batch-size", "0"],
                     timeout=60)
    wall = time.perf_counter() - start
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("scratchpar.train: invalid configuration:") == 1
    assert result.stderr.count("--n-heads (5) must divide --d-model (64)") == 1
    assert "Traceback" not in result.stderr
    assert wall < 30


def test_a_pipeline_stage_raising_mid_schedule_ends_every_rank_naming_stage_and_action():
    result, wall = launch(3, "launch_stage_raise.py", env={"SCRATCHPAR_COMM_TIMEOUT": "60"},
                          timeout=30)
    err = result.stderr
    assert result.returncode != 0
    assert wall < 10, f"the job took {wall:.1f} s to end:\n{err}"
    assert ("StageFailed: pipeline stage 1 of 3 failed in action F2: FloatingPointError: "
            "a bad value in the middle stage") in err, err
    assert "should have been ended" not in result.stdout
