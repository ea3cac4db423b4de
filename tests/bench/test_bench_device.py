"""The benchmarks' device plumbing: what a header names, the timing contract, DDP's backend."""

import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from graph_helpers import StandIn

from scratchpar import backend
from scratchpar.bench.dp import worker as dp_worker
from scratchpar.bench.step import cases
from scratchpar.bench.step.cases import gpt_case, mlp_case
from scratchpar.bench.step.driver import compare
from scratchpar.bench.timing import Timed, interleaved
from scratchpar.double import tally
from scratchpar.jobs import harness
from scratchpar.jobs.harness import describe, judge, staging, verdict


def fake_module(monkeypatch, name: str, **attributes):
    monkeypatch.setitem(sys.modules, name, SimpleNamespace(**attributes))


def test_a_cuda_header_names_the_gpu(monkeypatch):
    props = {"name": b"NVIDIA H100 80GB HBM3"}  # CuPy gives bytes
    runtime = SimpleNamespace(getDeviceProperties=lambda index: props)
    fake_module(monkeypatch, "cupy", cuda=SimpleNamespace(runtime=runtime))
    assert describe("cuda") == "cuda (NVIDIA H100 80GB HBM3, CuPy)"
    assert describe("cpu") == "cpu (NumPy)"
    assert describe("double").startswith("double (")


def test_a_headline_names_what_runs_its_device_and_the_machine():
    line = harness.headline("zero benchmark", SimpleNamespace(device="cpu", load_before=0.5))
    assert line.startswith(f"zero benchmark on cpu (NumPy), {os.cpu_count()} cores, one thread "
                           "per rank; load average (1 min) before 0.50, after ")


def test_the_double_times_nothing_real_so_it_gets_no_verdict():
    assert verdict("double", True) == "n/a (double)"
    assert verdict("cuda", False) == "MISS" and verdict("cpu", True) == "PASS"
    assert verdict("cpu", None) == "n/a"
    assert verdict("cuda", None, "n/a (no torch)") == "n/a (no torch)"


def test_verdicts_respect_the_direction_of_each_target():
    assert judge("cpu", 0.91, at_least=0.90) == "PASS"
    assert judge("cpu", 0.89, at_least=0.90) == "MISS"
    assert judge("cpu", 0.70, at_most=0.75) == "PASS"
    assert judge("cpu", 0.80, at_most=0.75) == "MISS"
    assert judge("cpu", None, at_most=0.75) == "n/a"
    assert judge("cpu", float("nan"), at_least=0.8, missing="n/a (not measured)") == (
        "n/a (not measured)")
    assert judge("double", 0.70, at_most=0.75) == "n/a (double)"
    assert judge("cpu", 1.5, at_least=1.0, at_most=2.0) == "PASS"
    assert judge("cpu", 2.5, at_least=1.0, at_most=2.0) == "MISS"


def test_staging_note_says_which_path_the_buffers_took():
    assert "not CUDA-aware" in staging("cuda", False) and "staged" in staging("cuda", False)
    assert "reads device buffers itself" in staging("cuda", True)
    assert "host buffers" in staging("cpu", False)


def test_every_timed_sample_ends_after_its_wait():
    events = []
    timed = Timed(lambda: events.append("run") or 7, lambda: events.append("sync"))
    assert timed() == 7 and events == ["run", "sync"]
    events.clear()
    interleaved({"a": timed}, repeats=2, warmup=1)
    assert events == ["run", "sync"] * 3


@pytest.mark.parametrize("make_case", [mlp_case, gpt_case])
def test_steps_on_a_device_queue_work_that_their_wait_finishes(make_case):
    """Each scratchpar-side contender's step leaves kernels queued on the (double's) stream, and
    its wait synchronizes it: without the wait, a GPU timing would time the launch only."""
    backend.set_device("double")
    case = make_case("double")
    ours = [c for c in case.contenders if c.name != "pytorch"]  # PyTorch's twin is on the CPU
    assert [c.name for c in ours] == (["scratchpar", "fused", "floor"] if make_case is mlp_case
                                      else ["scratchpar", "fused"])
    for contender in ours:
        contender.step.run()
        assert tally.Kernels.queued, contender.name
        contender.step.sync()
        assert not tally.Kernels.queued, contender.name


@pytest.mark.parametrize("make_case", [mlp_case, gpt_case])
def test_a_captured_step_is_the_fused_step_replayed_and_needs_nothing_of_the_host(
        make_case, monkeypatch):
    """On CUDA, a row captures the whole fused step (``captured``). Here on the double with a
    stand-in graph: its replayed forward and backward equal the plain ones, its steps update
    the weights as the plain steps do, and after its first run the step neither waits for
    the device, copies, nor uploads a host number, which a real capture would refuse."""
    monkeypatch.setattr(cases, "GRAPHS", ("cuda", "double"))
    monkeypatch.setattr(cases, "Replayed", StandIn)
    backend.set_device("double")
    case, plain = make_case("double"), make_case("double")  # from the same weights
    graphed = next(c for c in case.contenders if c.name == "captured")
    assert [row["contender"] for row in compare(case)][:3] == ["scratchpar", "fused", "captured"]
    for step in range(3):  # as it is, captured, replayed
        if step:
            with tally.watch() as seen:
                graphed.step.run()
            assert (seen.syncs_from(), seen.copies, seen.scalars) == ([], 0, [])
        else:
            graphed.step.run()
        plain.contenders[0].step.run()
    (loss, grads), (want, wanted) = (c.contenders[0].loss_and_grads() for c in (case, plain))
    assert loss == want and all(np.array_equal(grads[k], wanted[k]) for k in wanted)
    stepped = cases.Case(case.name, "", case.contenders[:3])  # the twins' weights stayed
    assert compare(stepped)[2]["grad_rel_err"] == 0  # replayed at the weights the steps left
    assert (seen.syncs_from(), seen.copies, seen.scalars) == ([], 0, [])


@pytest.mark.parametrize("local_size, gpus, expected", [(1, 1, "nccl"), (4, 4, "nccl"),
                                                        (2, 1, "gloo"), (4, 1, "gloo")])
def test_ddp_takes_nccl_only_when_every_rank_has_a_gpu_of_its_own(monkeypatch, local_size, gpus,
                                                                  expected):
    fake_module(monkeypatch, "torch", cuda=SimpleNamespace(device_count=lambda: gpus))
    comm = SimpleNamespace(local_size=local_size)
    assert dp_worker.ddp_backend("cuda", comm) == expected
    assert dp_worker.ddp_backend("cpu", comm) == "gloo"
    assert dp_worker.ddp_backend("double", comm) == "gloo"  # PyTorch runs on the CPU there


def test_every_benchmark_times_under_the_training_commands_allocator(monkeypatch):
    """A driver that times engine code in its own process (the pipeline's calibration) keeps
    freed memory as the training command does."""
    calls = []
    monkeypatch.setattr(harness, "keep_freed_memory", lambda: calls.append(1))
    bench = harness.Benchmark("s", "q", lambda args: {})
    assert harness.main({"b": bench}, ["b"]) == 0
    assert calls == [1]


def test_the_harness_adds_ranks_sorted_checked_and_defaulted_by_mode(capsys):
    """A benchmark's --ranks: the flag's sizes sorted and distinct, else the default of its
    mode; a size below the least refused by argparse before anything runs."""
    seen = []
    bench = harness.Benchmark("s", "q", lambda args: seen.append(args.ranks) or {},
                              ranks=harness.Ranks((2, 4), (2,), least=2, more="one job each"))
    for argv, ranks in [([], [2, 4]), (["--quick"], [2]), (["--ranks", "4,3,4"], [3, 4])]:
        assert harness.main({"b": bench}, ["b", *argv]) == 0 and seen.pop() == ranks
    with pytest.raises(SystemExit) as refused:
        harness.main({"b": bench}, ["b", "--ranks", "1,2"])
    assert refused.value.code == 2 and not seen
    assert "--ranks: every size must be at least 2, got 1,2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        harness.main({"b": bench}, ["b", "--help"])
    assert "world sizes, each ≥ 2 (default 2,4; --quick: 2); one job each" in " ".join(
        capsys.readouterr().out.split())
    alike = harness.Ranks((1, 2))  # no quick default: the default under --quick too
    assert alike.chosen(None, quick=True) == [1, 2] and alike.chosen([3], quick=True) == [3]
