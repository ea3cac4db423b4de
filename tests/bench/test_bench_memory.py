"""``python -m scratchpar.bench memory``: a tiny run end to end, its bytes against the formulas."""

import pytest
from bench_helpers import run_quick

from scratchpar.bench.memory import driver
from scratchpar.bench.zero.driver import LABELS
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
    assert {(r["precision"], r["contender"]) for r in rows} == {
        (p, LABELS[s]) for p in ("fp32", "fp16") for s in driver.STRATEGIES}
    for r in rows:
        for part in ("params", "optim"):
            assert r[part] == pytest.approx(r[f"f.{part}"], rel=0.02), r
        if r["contender"] == "ZeRO-1":
            assert r["grads"] >= r["f.grads"]
        else:
            assert r["grads"] == pytest.approx(r["f.grads"], rel=0.02), r
    assert [r["formula B/param"] for r in rows if r["contender"] == "DP"] == [16.0, 16.0]


def test_a_layers_activations_are_the_engines_count_and_recomputing_keeps_less(quick):
    _, result = quick
    rows = result["layers"]
    assert {(r["t"], r["layer"]) for r in rows} == {(1, "block"), (2, "tensor"), (2, "sequence")}
    for r in rows:
        for mode in ("none", "selective", "full"):
            assert r[f"÷ engine {mode}"] == pytest.approx(1.0, abs=0.01), (mode, r)
        assert r["full"] < r["selective"] < r["none"]
        assert r["full"] == r["K. full"]  # the input alone: Korthikanti's count exactly


def test_full_recomputation_lowers_the_steps_peak(quick):
    _, result = quick
    base = {r["size"]: r for r in result["steps"]
            if (r["precision"], r["recompute"]) == ("fp32", "none")}
    for r in result["steps"]:  # each beside fp32 without recomputation at its size
        assert r["× peak"] == pytest.approx(r["peak"] / base[r["size"]]["peak"])
        assert r["× fp32 none"] == pytest.approx(r["ms"] / base[r["size"]]["ms"])
    peaks = {(r["precision"], r["recompute"]): r["× peak"] for r in result["steps"]}
    assert peaks[("fp32", "full")] < 0.9


def test_a_gpipe_stage_recomputing_keeps_its_boundary_not_its_blocks(quick):
    """Per micro-batch in flight, a stage keeps at least its blocks' activations, less under
    selective recomputation, and under full little beyond its boundary input."""
    _, result = quick
    by = {(r["stage"], r["recompute"]): r for r in result["stash"]}
    assert {stage for stage, _ in by} == {0, 1}
    for stage in (0, 1):
        none, selective, full = (by[stage, mode] for mode in ("none", "selective", "full"))
        per = "per micro-batch"
        assert full[per] < selective[per] < none[per]
        assert all(r["measured/formula"] >= 1 for r in (none, selective, full))
        assert full[per] < 0.15 * none[per]
