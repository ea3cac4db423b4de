"""``python -m scratchpar.bench zero``: a tiny run end to end, its bytes against the formula."""

import json
import re

import numpy as np
import pytest
from bench_helpers import run_quick, table_rows

from scratchpar import nn
from scratchpar.bench.zero import driver as zero
from scratchpar.bench.zero.driver import CONTENDERS, LABELS
from scratchpar.train.memory_parameters import gpt_parameters

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
    assert result["quick"] and result["ranks"] == [2] and result["config"] == zero.QUICK
    want = [LABELS[name] for name in CONTENDERS]
    for model in zero.QUICK["models"]:
        assert [r["contender"] for r in result["memory"][model]["rows"]] == want
    memory = out.split("\n1. bytes per rank")[1:]
    assert len(memory) == len(zero.QUICK["models"])
    for block in memory:
        assert labels(table_rows("1." + block, "1."), 1) == want
    assert [r["contender"] for r in result["steps"]] == want
    assert labels(table_rows(out, "2. step time"), 1) == want


def test_measured_bytes_meet_the_formula_within_5_percent(quick):
    _, result, _ = quick
    for model, memory in result["memory"].items():
        for row in memory["rows"]:
            parts = ("params", "grads", "optim", "host")
            measured = sum(row[p] for p in parts)
            assert row["measured/formula"] == pytest.approx(measured / sum(row[f"f.{p}"]
                                                                           for p in parts))
            assert abs(row["measured/formula"] - 1) <= 0.05, (model, row)
            if row["contender"].endswith("offload"):  # the state lives on the host
                assert row["optim"] == 0 and row["host"] > 0
            assert row["activations"] > 0


def test_dp_holds_n_times_zero1s_optimizer_state_and_zero3_a_shard_of_the_parameters(quick):
    _, result, _ = quick
    for memory in result["memory"].values():
        by = {(r["N"], r["contender"]): r for r in memory["rows"]}
        for n in result["ranks"]:
            dp, z1, z3 = by[n, "DP"], by[n, "ZeRO-1"], by[n, "ZeRO-3"]
            assert dp["optim"] == pytest.approx(n * z1["optim"], rel=0.01)
            assert dp["params"] == pytest.approx(n * z3["params"], rel=0.01)
            assert z3["gathered"] > 0 and dp["gathered"] == z1["gathered"] == 0


def test_the_checkpoint_rows_show_each_rank_writing_its_share(quick):
    """At N = 2 the busiest rank writes about half the state in pieces, and rank 0 all of it
    through the single file: half, within each piece's own .npy header and zip entry (a tiny
    model's pieces are small)."""
    out, result, _ = quick
    rows = {r["written by"]: r for r in result["checkpoints"]}
    assert [r["N"] for r in result["checkpoints"]] == [2, 2]
    pieces, single = rows["every rank, its pieces"], rows["rank 0, the whole state"]
    assert pieces["busiest rank MB"] == pytest.approx(single["busiest rank MB"] / 2, rel=0.05)
    assert all(r["save ms"] > 0 and r["resume ms"] > 0 for r in rows.values())
    assert len(table_rows(out, "4. ZeRO-3's checkpoints")) == 2


def test_the_target_is_zero3s_row_of_the_step_table(quick):
    out, result, _ = quick
    target, rows = result["target"], {r["contender"]: r for r in result["steps"]}
    assert target["ranks"] == 2 and target["ratio"] == pytest.approx(rows["ZeRO-3"]["× DP"])
    assert f"ZeRO-3 ≤ 1.5× DP: {target['verdict']} ({target['ratio']:.2f}×, N = 2)" in out
    for row in result["steps"]:  # the ratio and the split are of the same steps
        assert row["× DP"] == pytest.approx(row["ms/step"] / rows["DP"]["ms/step"])


def medians(**seconds) -> dict:
    """A world's timings: each contender's median seconds (the others' 10 ms), its phases
    rank 0's step alone."""
    timed = {name: seconds.get(name.replace("-", "_"), 0.01) for name in CONTENDERS}
    return {"timing": {"step_s": timed,
                       "phases_s": {name: [s, 0.0, 0.0, 0.0] for name, s in timed.items()}}}


def test_step_times_are_over_dps_of_the_same_world_and_the_target_is_at_two_ranks():
    results = {2: medians(dp=0.02, zero3=0.03, zero1_offload=0.005),
               4: medians(dp=0.01, zero3=0.04)}
    steps = zero.step_rows(results)
    rows = {(r["N"], r["contender"]): r for r in steps}
    assert rows[2, "ZeRO-3"]["ms/step"] == pytest.approx(30.0)
    assert rows[4, "ZeRO-3"]["ms/step"] == 40.0
    assert rows[2, "ZeRO-3"]["× DP"] == pytest.approx(1.5)
    assert rows[4, "ZeRO-3"]["× DP"] == pytest.approx(4.0)
    assert rows[2, "ZeRO-1 offload"]["× DP"] == pytest.approx(0.25)
    assert rows[4, "DP"]["× DP"] == 1.0 and rows[4, "ZeRO-1"]["× DP"] == pytest.approx(1.0)
    assert zero.zero3_target(steps, "cpu") == {"ranks": 2, "ratio": pytest.approx(1.5),
                                               "target": 1.5, "verdict": "PASS"}  # at the bound
    assert zero.zero3_target(zero.step_rows({4: results[4]}), "cpu") == {
        "ranks": 4, "ratio": pytest.approx(4.0), "target": 1.5, "verdict": "MISS"}


def test_only_offload_copies_and_the_split_fits_in_the_step(quick):
    """Forward, copies and update are disjoint spans of rank 0's step, which lies inside its
    timed sample, which the slowest rank's bounds; the quick run's medians are of two steps,
    their means, so the parts add."""
    _, result, _ = quick
    assert zero.QUICK["repeats"] == 2
    for row in result["steps"]:
        offloaded = row["contender"].endswith("offload")
        assert (row["copies"] > 0) == offloaded
        parts = row["forward"] + row["copies"] + row["update"]
        assert 0 < parts <= row["rank 0 ms"] + 1e-9 and row["rank 0 ms"] <= row["ms/step"] + 1e-9


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


def test_psi_is_nn_gpts_parameter_count():
    for spec in (*zero.QUICK["models"].values(), *zero.CONFIG["models"].values()):
        model = nn.GPT(spec["vocab"], spec["seq"], spec["d_model"], spec["heads"],
                       spec["layers"], np.random.default_rng(0))
        assert gpt_parameters(spec["vocab"], spec["seq"], spec["d_model"], spec["layers"]) == \
            model.num_parameters()
