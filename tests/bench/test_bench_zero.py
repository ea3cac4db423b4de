"""``python -m scratchpar.bench zero``: a tiny run end to end, its bytes against the formula."""

import json
import re
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from bench_helpers import run_quick, table_rows

from scratchpar import nn
from scratchpar.bench.zero import driver as zero
from scratchpar.bench.zero.driver import CONTENDERS, LABELS
from scratchpar.bench.zero.worker import gpt_parameters, largest

PNG = b"\x89PNG\r\n\x1a\n"
FIGURES = ("zero_memory.png", "zero3_timeline.png", "zero_offload.png")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick run's printed tables, its JSON and its figures folder."""
    return run_quick("zero", tmp_path_factory.mktemp("zero-bench"))


def labels(rows: list[list[str]], skip: int) -> list[str]:
    """The contender column of printed rows (a label may hold a space: "ZeRO-1 offload")."""
    return [" ".join(cell for cell in row[skip:skip + 2] if not re.match(r"^[\d.-]+$", cell))
            for row in rows]


def test_every_table_has_a_row_for_dp_and_every_stage(quick):
    out, result, _ = quick
    assert result["quick"] and result["ranks"] == [2] and result["models"] == zero.QUICK_MODELS
    want = [LABELS[name] for name in CONTENDERS]
    for model in zero.QUICK_MODELS:
        assert [r["label"] for r in result["memory"][model]] == want
    memory = out.split("\n1. bytes per rank")[1:]
    assert len(memory) == len(zero.QUICK_MODELS)
    for block in memory:
        assert labels(table_rows("1." + block, "1."), 1) == want
    assert labels(table_rows(out, "2. step time"), 0) == want
    assert labels(table_rows(out, "3. offload"), 1) == [
        LABELS[f"zero{s}{o}"] for s in (1, 2, 3) for o in ("", "-offload")]
    assert "needs a GPU (--device cuda): skipped on cpu" in out and result["fits"] is None


def test_measured_bytes_meet_the_formula_within_5_percent(quick):
    _, result, _ = quick
    for model, rows in result["memory"].items():
        for row in rows:
            parts = ("parameters", "gradients", "optimizer", "host")
            measured = sum(row[p] for p in parts)
            assert row["ratio"] == pytest.approx(measured / sum(row[f"formula_{p}"]
                                                                for p in parts))
            assert abs(row["ratio"] - 1) <= 0.05, (model, row)
            if row["contender"].endswith("offload"):  # the state lives on the host
                assert row["optimizer"] == 0 and row["host"] > 0
            assert row["activations"] > 0


def test_dp_holds_n_times_zero1s_optimizer_state_and_zero3_a_shard_of_the_parameters(quick):
    _, result, _ = quick
    for rows in result["memory"].values():
        by = {(r["ranks"], r["contender"]): r for r in rows}
        for n in result["ranks"]:
            dp, z1, z3 = by[n, "dp"], by[n, "zero1"], by[n, "zero3"]
            assert dp["optimizer"] == pytest.approx(n * z1["optimizer"], rel=0.01)
            assert dp["parameters"] == pytest.approx(n * z3["parameters"], rel=0.01)
            assert z3["gathered"] > 0 and dp["gathered"] == z1["gathered"] == 0


def test_the_target_is_zero3s_row_of_the_step_table(quick):
    out, result, _ = quick
    target, rows = result["target"], {r["contender"]: r for r in result["timing"]}
    assert target["ranks"] == 2 and target["ratio"] == pytest.approx(rows["zero3"]["vs_dp_2"])
    assert f"ZeRO-3 ≤ 1.5× DP: {target['verdict']} ({target['ratio']:.2f}×, N = 2)" in out
    for row in result["offload"]:  # both tables time the same steps
        assert row["step_ms"] == rows[row["contender"]]["ms_2"]


def medians(**seconds) -> dict:
    """A world's timings: each contender's median seconds (the others' 10 ms)."""
    return {"timing": {"timed": {name: {"median_s": seconds.get(name.replace("-", "_"), 0.01)}
                                 for name in CONTENDERS}}}


def test_step_times_are_over_dps_of_the_same_world_and_the_target_is_at_two_ranks():
    results = {2: medians(dp=0.02, zero3=0.03, zero1_offload=0.005),
               4: medians(dp=0.01, zero3=0.04)}
    rows = {r["contender"]: r for r in zero.timing_rows(results)}
    assert rows["zero3"]["ms_2"] == pytest.approx(30.0) and rows["zero3"]["ms_4"] == 40.0
    assert rows["zero3"]["vs_dp_2"] == pytest.approx(1.5)
    assert rows["zero3"]["vs_dp_4"] == pytest.approx(4.0)
    assert rows["zero1-offload"]["vs_dp_2"] == pytest.approx(0.25)
    assert rows["dp"]["vs_dp_4"] == 1.0 and rows["zero1"]["vs_dp_4"] == pytest.approx(1.0)
    assert zero.zero3_target(results, "cpu") == {"ranks": 2, "ratio": pytest.approx(1.5),
                                          "target": 1.5, "verdict": "PASS"}  # at the bound
    assert zero.zero3_target({4: results[4]}, "cpu") == {"ranks": 4, "ratio": pytest.approx(4.0),
                                                  "target": 1.5, "verdict": "MISS"}
    assert zero.zero3_target({}, "cpu") is None


def test_only_offload_copies_and_the_split_fits_in_the_step(quick):
    """Forward, copies and update are disjoint spans of rank 0's step, which lies inside its
    timed sample, which the slowest rank's bounds; the quick run's medians are of two steps,
    their means, so the parts add."""
    _, result, _ = quick
    assert zero.QUICK_TIMING["repeats"] == 2
    for row in result["offload"]:
        offloaded = row["contender"].endswith("offload")
        assert (row["copy_ms"] > 0) == offloaded
        parts = row["forward_ms"] + row["copy_ms"] + row["update_ms"]
        assert 0 < parts <= row["own_ms"] + 1e-9 and row["own_ms"] <= row["step_ms"] + 1e-9


def test_the_figures_and_the_zero3_trace_are_written(quick):
    _, result, figures = quick
    for name in FIGURES:
        data = (figures / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 1000
    assert sorted(result["figures"]) == sorted(str(figures / name) for name in FIGURES)
    trace = json.loads((figures / "zero3_timeline.trace.json").read_text())
    regions = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in regions} == {0, 1}
    names = {(e["cat"], e["name"].split("/")[0]) for e in regions}
    assert {("compute", "forward"), ("compute", "backward"), ("comm", "all_gather"),
            ("comm", "reduce_scatter")} <= names
    assert any(cat == "memory" and re.fullmatch(r"(layer \d+|root) gathered", name)
               for cat, name in names)


def test_the_parameter_count_of_the_gpu_search_is_nn_gpts():
    for spec in (*zero.QUICK_MODELS.values(), *zero.MODELS.values()):
        model = nn.GPT(spec["vocab"], spec["seq"], spec["d_model"], spec["heads"],
                       spec["layers"], np.random.default_rng(0))
        assert gpt_parameters(spec) == model.num_parameters()


class OutOfMemory(MemoryError):
    """Stands in for cupy.cuda.memory.OutOfMemoryError."""


class OneRank:
    """A world of one: duplicates are itself, every rank's verdict is its own."""

    timeout = 0.0

    def dup(self, name):
        return self

    def free(self):
        pass

    def allgather_obj(self, obj, what):
        return [obj]


def test_the_gpu_search_doubles_then_bisects_to_the_widest_that_fits(monkeypatch):
    limits = []
    pool = SimpleNamespace(set_limit=lambda size: limits.append(size), free_all_blocks=lambda: 0)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(
        cuda=SimpleNamespace(memory=SimpleNamespace(OutOfMemoryError=OutOfMemory)),
        get_default_memory_pool=lambda: pool))
    cfg = {**zero.QUICK_FITS, "budget_gib": 0.5}

    def under(width):
        def attempt(comm, spec):
            assert spec["heads"] * cfg["head_dim"] == spec["d_model"]
            if spec["d_model"] > width:
                raise OutOfMemory
        return attempt

    found = largest(OneRank(), cfg, under(500))  # 64, 128, 256 fit; 512 does not; bisect
    assert found["d_model"] == 480 and not found["capped"]
    assert found["tried"] == [[64, True], [128, True], [256, True], [512, False],
                              [384, True], [448, True], [480, True]]
    assert found["params"] == gpt_parameters({**cfg["model"], "d_model": 480})
    assert limits == [1 << 29, 0]  # the budget, then no limit again
    assert largest(OneRank(), cfg, under(10))["d_model"] is None
    capped = largest(OneRank(), cfg, under(1 << 20))
    assert capped["capped"] and capped["d_model"] == cfg["max_d_model"]
