"""``python -m scratchpar.bench tensor``: a tiny run at t = 1, 2 end to end, its exact counts."""

import numpy as np
import pytest
from bench_helpers import run_quick

from scratchpar.bench.tensor import driver
from scratchpar.nn import Block


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick run's printed tables and its JSON."""
    return run_quick("tensor", tmp_path_factory.mktemp("tensor-bench"), figures=False)[:2]


def test_the_json_holds_every_table_for_the_quick_ranks(quick):
    out, result = quick
    assert result["config"] == driver.QUICK and result["ranks"] == [1, 2]
    for heading in ("collectives per transformer layer", "speed-up of the transformer MLP",
                    "held per rank"):
        assert heading in out
    assert {(r["t"], r["layer"], r["rank"]) for r in result["memory"]} == {
        (1, "tensor", 0), (1, "sequence", 0), (2, "tensor", 0), (2, "tensor", 1),
        (2, "sequence", 0), (2, "sequence", 1)}


def test_each_layer_runs_exactly_its_collectives_each_way(quick):
    _, result = quick
    rows = result["collectives"]
    assert {r["t"] for r in rows} == {2}
    counted = {(r["layer"], r["pass"], r["op"]): r["counted"] for r in rows
               if r["expected"] is not None}
    assert counted == {(layer, p, op): 2
                       for layer, ops in (("ParallelBlock", ("all_reduce",)),
                                          ("SequenceParallelBlock",
                                           ("all_gather", "reduce_scatter")))
                       for p in ("forward", "backward") for op in ops}
    for r in rows:
        assert r["every_rank"] is True
        if r["expected"] is not None:
            assert r["counted"] == r["expected"]
            assert r["bytes"] == str(r["formula"])  # each of them the same size
        else:  # the sequence-parallel all-gather's pickled exchange of the shards' lengths,
            # once a forward call, which the tracer does not record (docs/tensor_parallel.md)
            assert r["op"].startswith("metadata")
            assert r["counted"] == counted.get((r["layer"], "forward", "all_gather"), 0) \
                * (r["pass"] == "forward")


def test_parameters_gradients_and_activations_match_their_formulas(quick):
    _, result = quick
    for r in result["memory"]:
        assert r["param_bytes"] == r["param_formula"] == r["grad_bytes"]
        assert r["activation_bytes"] == r["activation_formula"]
    one = result["one_device"]
    halves = [r for r in result["memory"] if r["t"] == 2]
    assert sum(r["param_bytes"] for r in halves if r["layer"] == "tensor") == \
        one["param_bytes"] + driver.FLOAT32 * 6 * driver.QUICK["block"]["d_model"]
    by = {(r["t"], r["layer"], r["rank"]): r["activation_bytes"] for r in result["memory"]}
    assert by[2, "sequence", 0] < by[2, "tensor", 0] < by[1, "tensor", 0]


def test_the_speedup_is_the_ratio_of_the_medians_at_t_2(quick):
    _, result = quick
    [row] = result["timing"]
    timed = result["timed"]["2"]  # the slowest rank's samples, one device's and t = 2's in turns
    alone, split = (np.median(timed[k]["samples_s"]) for k in ("alone", "split"))
    assert row["t"] == 2 and len(timed["split"]["samples_s"]) == driver.QUICK["repeats"]
    assert row["alone_ms"] == pytest.approx(1e3 * alone)
    assert row["tensor_ms"] == pytest.approx(1e3 * split)
    assert row["speedup"] == pytest.approx(alone / split)
    assert row["efficiency"] == pytest.approx(alone / split / 2)
    assert row["megatron"] == 1.64 and float(row["max_abs_diff"]) < 1e-5


def test_the_parameter_formula_counts_a_whole_block_at_t_1():
    cfg = driver.QUICK["block"]
    block = Block(cfg["d_model"], cfg["heads"], np.random.default_rng(0))
    assert driver.param_formula(cfg, 1, 0) == 4 * block.num_parameters()
    assert sum(driver.param_formula(cfg, 3, r) for r in range(3)) == \
        4 * block.num_parameters() + 2 * 4 * 6 * cfg["d_model"]  # replicated 6C on each rank
