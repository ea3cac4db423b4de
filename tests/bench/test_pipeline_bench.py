"""``python -m scratchpar.bench pipeline``: a quick run end to end, and its pure parts."""

import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest
from bench_helpers import run_quick

from scratchpar.autograd import Tensor
from scratchpar.bench import standin
from scratchpar.bench.pipeline import driver as pipeline
from scratchpar.bench.pipeline.worker import bubble, summary
from scratchpar.bench.standin import WIDTH, SleepLayer, summed
from scratchpar.trace.tracer import Event

SCHEDULES = ["gpipe", "1f1b", "interleaved", "naive", "bprio", "pipedream"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick run's printed tables, its JSON, and its figures folder."""
    return run_quick("pipeline", tmp_path_factory.mktemp("pipeline-bench"))


def test_bubbles_are_fractions_beside_the_exact_formula(quick):
    _, result, _ = quick
    sizes = result["sizes"]
    assert {(r["schedule"], r["p"], r["m"]) for r in result["bubbles"]} == {
        (s, p, m) for s in ("gpipe", "1f1b") for p in sizes["ps"] for m in sizes["ms"]}
    for r in result["bubbles"]:
        p, m = r["p"], r["m"]
        assert 0 <= r["bubble"] < 1
        assert r["formula"] == (p - 1) / (m + p - 1)
        assert r["simulated"] == pytest.approx(r["formula"])  # every stage costs the same
        assert (r["ok"] is None) == (m < 4 * p)
    judged = [r["ok"] for r in result["bubbles"] if r["ok"] is not None]
    assert result["targets"]["bubble ≤ 1.1× formula at m ≥ 4p"] == {"met": sum(judged),
                                                                   "of": len(judged)}


def test_interleaved_rows_compare_with_1f1b_at_the_same_p_and_m(quick):
    _, result, _ = quick
    assert {(r["p"], r["v"]) for r in result["interleaved"]} == {
        (p, v) for p in result["sizes"]["ps"] for v in result["sizes"]["vs"]}
    for r in result["interleaved"]:
        p, m, v = r["p"], r["m"], r["v"]
        assert m % p == 0 and 0 <= r["bubble"] < 1 and 0 <= r["1f1b_bubble"] < 1
        assert r["formula"] == (p - 1) / (v * m + p - 1)
        assert r["simulated"] == pytest.approx(r["formula"])
        assert r["idle_ratio"] > 0 and r["target"] == pytest.approx(1.1 / v)


def test_zero_bubble_rows_compare_with_1f1b_at_the_same_p_and_m(quick):
    """ZB-H1 runs on the sleep stages, W apart from B, against 1F1B's idle time at the same
    p and m, whose ideal ratio the calibrated W share gives."""
    _, result, _ = quick
    f, b, w = (result["calibration"][k] for k in ("forward_s", "backward_s", "weight_s"))
    assert 0 < w < b
    assert {(r["p"], r["m"]) for r in result["zero_bubble"]} == {
        (p, k * p) for p in result["sizes"]["ps"] for k in result["sizes"]["per_p"]}
    for r in result["zero_bubble"]:
        assert 0 <= r["bubble"] < 1 and 0 <= r["1f1b_bubble"] < 1 and 0 <= r["simulated"] < 1
        assert r["ideal"] == pytest.approx((f + b - 2 * w) / (f + b))
        assert r["idle_ratio"] > 0 and r["target"] == pytest.approx(1.1 * r["ideal"])


def test_1f1b_stashes_at_most_p_minus_s_and_gpipe_every_micro_batch(quick):
    _, result, _ = quick
    m = max(result["sizes"]["ms"])
    stages = {(r["p"], r["stage"]) for r in result["memory"]}
    assert stages == {(p, s) for p in result["sizes"]["ps"] for s in range(p)}
    for r in result["memory"]:
        p, s = r["p"], r["stage"]
        assert r["m"] == m and r["gpipe_peak"] == m and r["bound"] == p - s
        assert r["1f1b_peak"] <= p - s and r["1f1b_peak"] == r["1f1b_simulated"]
        assert 0 < r["1f1b_bytes"] < r["gpipe_bytes"] and r["ok"] is True


def test_every_schedule_runs_and_the_gpt_contenders_have_throughputs(quick):
    out, result, _ = quick
    assert [r["schedule"] for r in result["schedules"]] == SCHEDULES
    assert all(0 <= r["bubble"] < 1 for r in result["schedules"])
    assert {r["contender"] for r in result["real"]} == {
        "alone", "alone-micro", "dp", "naive", "gpipe", "1f1b", "zb-h1"}
    gpt, ms = result["gpt"], {r["contender"]: r["ms"] for r in result["real"]}
    for r in result["real"]:  # a step is the batch's tokens; each ratio over the same job's
        assert r["ms"] > 0
        assert r["tokens_per_s"] == pytest.approx(gpt["batch"] * gpt["seq"] / (r["ms"] / 1e3))
        assert r["vs_one_device"] == pytest.approx(ms["alone"] / r["ms"])
        assert r["vs_micro"] == pytest.approx(ms["alone-micro"] / r["ms"])
    for r in result["real_memory"]:  # each of 2 ranks holds a share of the GPT's weights
        assert 0 < r["param_bytes"] < r["model_bytes"] and r["peak"] >= 1
    shares = {}
    for r in result["real_memory"]:
        shares[r["contender"]] = shares.get(r["contender"], 0) + r["share"]
    assert set(shares) == {"naive", "gpipe", "1f1b", "zb-h1"}
    assert all(total == pytest.approx(1.0) for total in shares.values())  # nothing twice
    calib = result["calibration"]
    assert calib["forward_s"] > 0 and calib["backward_s"] > 0 and len(calib["stages"]) == 2
    for heading in ("calibration:", "bubble, sleep stages", "interleaved against 1F1B",
                    "peak stashed activations", "every schedule at p=4", "targets:"):
        assert heading in out


def test_figures_are_drawn_from_the_traces(quick):
    _, result, figures = quick
    names = ["gpipe_p4_m8", "1f1b_p4_m8", "interleaved_v2_p4_m8", "naive_p4_m1",
             "bprio_p4_m8", "pipedream_p4_m8"]
    for name in names:
        assert (figures / f"pipeline_{name}.trace.json").exists()
    if importlib.util.find_spec("matplotlib") is None:
        assert result["figures"] == []
        return
    expected = ["pipeline_bubble.png"] + [f"pipeline_{name}.png" for name in names]
    assert [Path(f).name for f in result["figures"]] == expected
    assert all((figures / png).stat().st_size > 0 for png in expected)


def test_a_step_bubble_is_the_idle_share_of_the_window_across_ranks():
    ms = 1_000_000  # ns
    rank0 = [Event("RECV_ACT 0←1", "comm", 0, ms), Event("F0", "compute", 0, 2 * ms),
             Event("B0", "compute", 6 * ms, 10 * ms), Event("STEP", "compute", 10 * ms, 11 * ms)]
    rank1 = [Event("F0", "compute", 2 * ms, 4 * ms), Event("B0.1", "compute", 4 * ms, 6 * ms)]
    s0, s1 = summary(rank0), summary(rank1)
    assert s0 == pytest.approx((0.0, 0.010, 0.006)) and s1 == pytest.approx((0.002, 0.006, 0.004))
    idle, window = bubble([s0, s1])
    assert window == pytest.approx(0.010) and idle == pytest.approx(1 - 0.010 / 0.020)


def test_runs_share_the_1f1b_baseline_and_trace_only_the_compared_schedules():
    runs = pipeline.runs_for(4, pipeline.QUICK, figures=True)
    keys = [(r["schedule"], r["m"], r["v"]) for r in runs]
    assert len(keys) == len(set(keys))
    assert ("1f1b", 8, 1) in keys and ("interleaved", 8, 2) in keys
    assert {k for k, r in zip(keys, runs) if r["trace"]} == {
        ("gpipe", 8, 1), ("1f1b", 8, 1), ("interleaved", 8, 2), ("naive", 1, 1),
        ("bprio", 8, 1), ("pipedream", 8, 1)}
    assert not any(r["trace"] or r["compared"] for r in pipeline.runs_for(2, pipeline.QUICK,
                                                                          figures=True))


@pytest.mark.parametrize("reduction, scale", [("sum", 1.0), ("mean", 1 / 3)])
def test_a_sleep_pipeline_s_loss_is_one_sum_of_its_outputs(reduction, scale):
    out = Tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    loss = summed(out, np.zeros(3), reduction)
    loss.backward()
    assert float(loss.data) == pytest.approx(15.0 * scale)
    np.testing.assert_array_equal(out.grad, np.full((3, 2), scale))


def test_a_spinning_sleep_layer_never_sleeps_and_matches_a_sleeping_one(monkeypatch):
    """Where each rank has a core the stand-in polls its time away, as compute would hold the
    core; its outputs and gradients are the sleeping layer's, and it lasts its time."""
    x = np.random.default_rng(0).standard_normal((4, WIDTH))
    results = {}
    for spin in (False, True):
        if spin:
            monkeypatch.setattr(standin.time, "sleep", lambda s: pytest.fail("slept"))
        layer = SleepLayer(2e-3, 3e-3, 1e-3, spin=spin)
        layer.weight.data[:] = 1.5
        start = time.perf_counter()
        inputs = Tensor(x, requires_grad=True)
        layer(inputs).sum().backward()
        assert time.perf_counter() - start >= 5e-3
        results[spin] = inputs.grad, layer.weight.grad
    for a, b in zip(results[False], results[True]):
        np.testing.assert_array_equal(a, b)
