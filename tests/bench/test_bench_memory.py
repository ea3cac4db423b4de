"""``python -m scratchpar.bench memory``: a tiny run end to end, its bytes against the formulas."""

import pytest
from bench_helpers import run_quick

from scratchpar.bench.memory import driver
from scratchpar.train.memory_models import korthikanti


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick run's printed tables and its JSON."""
    return run_quick("memory", tmp_path_factory.mktemp("memory-bench"), figures=False)[:2]


def test_korthikanti_in_16_bits_is_the_papers_table():
    """Their Table 2 at e = 2 bytes: sbh(34 + 5as/h) on one device, sbh(10 + 24/t + 5as/(ht))
    with tensor parallelism, sbh/t·(34 + 5as/h) with sequence parallelism, 34sbh/t with
    selective recomputation too, 2sbh with full."""
    s, b, h, a, t = 512, 4, 1024, 16, 8
    sbh = s * b * h
    assert korthikanti(s, b, h, a, 1, 2, "none", False) == sbh * (34 + 5 * a * s / h)
    assert korthikanti(s, b, h, a, t, 2, "none", False) == \
        pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert korthikanti(s, b, h, a, t, 2, "none", True) == \
        pytest.approx(sbh / t * (34 + 5 * a * s / h))
    assert korthikanti(s, b, h, a, t, 2, "selective", True) == pytest.approx(34 * sbh / t)
    assert korthikanti(s, b, h, a, 1, 2, "full", False) == 2 * sbh


def test_the_ledger_holds_zeros_parts_in_each_precision(quick):
    """Parameters and optimizer state as ZeRO's formula says (mixed: 2 + 2 + 12 bytes a
    parameter for DP); gradients too, but for the bucket ZeRO-1 packs beside them."""
    out, result = quick
    assert "model states per rank" in out and result["config"]["states"] == driver.QUICK["states"]
    rows = result["states"]
    assert {(r["precision"], r["strategy"]) for r in rows} == {
        (p, driver.LABELS[s]) for p in ("fp32", "fp16") for s in driver.STRATEGIES}
    for r in rows:
        for part in ("parameters", "optimizer"):
            assert r[part] == pytest.approx(r[f"f_{part}"], rel=0.02), r
        if r["strategy"] == "ZeRO-1":
            assert r["gradients"] >= r["f_gradients"]
        else:
            assert r["gradients"] == pytest.approx(r["f_gradients"], rel=0.02), r
    assert [r["per_param"] for r in rows if r["strategy"] == "DP"] == [16.0, 16.0]


def test_a_layers_activations_are_the_engines_count_and_recomputing_keeps_less(quick):
    _, result = quick
    rows = result["layers"]
    assert {(r["t"], r["layer"]) for r in rows} == {(1, "block"), (2, "tensor"), (2, "sequence")}
    for r in rows:
        for mode in ("none", "selective", "full"):
            assert r[f"r_{mode}"] == pytest.approx(1.0, abs=0.01), (mode, r)
        assert r["full"] < r["selective"] < r["none"]
        assert r["full"] == r["f_full"]  # the input alone: Korthikanti's count exactly


def test_full_recomputation_lowers_the_steps_peak(quick):
    _, result = quick
    base = {r["size"]: r for r in result["steps"]
            if (r["precision"], r["recompute"]) == ("fp32", "none")}
    for r in result["steps"]:  # each beside fp32 without recomputation at its size
        assert r["peak_ratio"] == pytest.approx(r["peak"] / base[r["size"]]["peak"])
        assert r["time"] == pytest.approx(r["ms"] / base[r["size"]]["ms"])
    peaks = {(r["precision"], r["recompute"]): r["peak_ratio"] for r in result["steps"]}
    assert peaks[("fp32", "full")] < 0.9


def test_a_gpipe_stage_recomputing_keeps_its_boundary_not_its_blocks(quick):
    """Per micro-batch in flight, a stage keeps at least its blocks' activations, less under
    selective recomputation, and under full little beyond its boundary input."""
    _, result = quick
    by = {(r["stage"], r["recompute"]): r for r in result["stash"]}
    assert {stage for stage, _ in by} == {0, 1}
    for stage in (0, 1):
        none, selective, full = (by[stage, mode] for mode in ("none", "selective", "full"))
        assert full["per"] < selective["per"] < none["per"]
        assert none["ratio"] >= 1 and selective["ratio"] >= 1 and full["ratio"] >= 1
        assert full["per"] < 0.15 * none["per"]
