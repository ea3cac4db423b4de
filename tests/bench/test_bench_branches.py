"""``python -m scratchpar.bench branches``: a tiny 1- and 2-rank run end to end, and its counts."""

import json

import numpy as np
import pytest
from bench_helpers import table_rows

from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.autograd.held import graph_bytes
from scratchpar.bench.__main__ import main
from scratchpar.bench.branches import driver as branches
from scratchpar.nn import Towers


def test_quick_run_prints_both_tables_for_each_world_size(capsys, tmp_path):
    path = tmp_path / "branches.json"
    assert main(["branches", "--quick", "--ranks", "1,2", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    timing = table_rows(out, "step time")
    assert [r[:2] for r in timing] == [["1", "3"], ["2", "2/1"]]  # k = 3 towers over the ranks
    held = table_rows(out, "held per rank")
    assert [r[:3] for r in held] == [["1", "0", "3"], ["2", "0", "2"], ["2", "1", "1"]]
    result = json.loads(path.read_text())
    assert result["config"] == branches.QUICK and result["ranks"] == [1, 2]
    for row in result["timing"]:  # the medians of the slowest rank's samples, in turns
        timed = result["timed"][str(row["ranks"])]
        alone, split = (np.median(timed[k]["samples_s"]) for k in ("alone", "split"))
        assert len(timed["alone"]["samples_s"]) == branches.QUICK["repeats"]
        assert row["alone_ms"] == pytest.approx(1e3 * alone)
        assert row["branches_ms"] == pytest.approx(1e3 * split)
        assert row["speedup"] == pytest.approx(alone / split)
    assert [row["ideal"] for row in result["timing"]] == [1.0, 1.5]
    one, k = result["one_device"], branches.QUICK["k"]
    assert one["param_bytes"] == branches.param_formula(branches.QUICK, k)
    for row in result["memory"]:  # what a rank holds is its towers and the head, exactly
        assert row["param_bytes"] == row["param_formula"]
        assert row["param_share"] == pytest.approx(
            branches.param_formula(branches.QUICK, row["towers"])
            / branches.param_formula(branches.QUICK, k))
        assert row["activation_bytes"] > 0 and float(row["loss_diff"]) < 1e-5
    two = [row for row in result["memory"] if row["ranks"] == 2]
    assert sum(row["param_bytes"] for row in two) == one["param_bytes"] + \
        branches.param_formula(branches.QUICK, 0)  # the towers once, the head on each rank
    assert all(row["activation_bytes"] < one["activation_bytes"] for row in two)


def test_the_parameter_formula_counts_a_towers_model():
    cfg = branches.QUICK
    model = Towers(cfg["features"], cfg["sizes"], cfg["k"], cfg["classes"],
                   np.random.default_rng(0))
    assert branches.param_formula(cfg, cfg["k"]) == 4 * model.num_parameters()


def test_graph_bytes_counts_each_buffer_once_and_no_parameter():
    w = Tensor(np.ones((3, 2), np.float32), requires_grad=True)  # a parameter: not counted
    x = Tensor(np.ones((4, 3), np.float32))  # 48 B, kept by the product for w's gradient
    h = F.relu(F.matmul(x, w))  # the product (4, 2) is read by no backward: ReLU keeps its
    out = F.reshape(h, (8,))    # mask, 8 B; its output h, 32 B, is out's buffer (a view)
    assert graph_bytes(out, [w]) == 48 + 8 + 32
