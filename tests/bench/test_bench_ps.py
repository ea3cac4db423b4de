"""``python -m scratchpar.bench ps``: a tiny run of every part end to end, its exact counts."""

import importlib.util
import math
import os

import numpy as np
import pytest
from bench_helpers import run_quick, table_rows

from scratchpar.bench.ps import driver as ps
from scratchpar.bench.ps.report import HEADER_BYTES, protocol_bytes, ring_formula, run_seconds
from scratchpar.bench.standin import StandIn, count_fn, loss_fn


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick run's printed tables, its JSON and its figures folder."""
    return run_quick("ps", tmp_path_factory.mktemp("ps-bench"))


def test_every_server_moves_the_protocols_bytes(quick):
    out, result, _ = quick
    steps, itemsize = result["config"]["bottleneck"]["steps"], 4
    printed = table_rows(out, "1. bytes through the busiest server")
    assert [r[:3] for r in printed] == [["3", "1", "2"], ["4", "1", "3"], ["4", "2", "2"]]
    for row, cells in zip(result["bytes"], printed):
        k, s, w = row["parameters"], row["servers"], row["workers"]
        assert [int(c) for c in cells[3:6]] == [k, row["server_bytes"], row["protocol_bytes"]]
        if s == 1:  # K·itemsize both ways per worker and step, and a header each time
            assert row["protocol"] == [2 * k * itemsize * steps * w
                                       + HEADER_BYTES * w * (steps + 1)]
        assert row["protocol"] == protocol_bytes(k, itemsize, s, w, steps)
        assert sum(row["protocol"]) - HEADER_BYTES * s * w * (steps + 1) == \
            2 * k * itemsize * steps * w  # the ranges cut K: the servers together move it once
        assert row["bytes"] == row["protocol"]  # every server, to the byte
        assert row["pushes"] == w * steps  # every push applied


def test_the_ring_moves_its_formulas_bytes(quick):
    _, result, _ = quick
    for row in result["bytes"]:
        k, p = row["parameters"], row["ranks"]
        assert abs(row["ring_bytes"] - ring_formula(k, 4, p)) <= 4 * 4  # chunks differ by 1
        assert row["ring_formula"] == round(ring_formula(k, 4, p))
        assert row["ratio"] == pytest.approx(row["server_bytes"] / steps_of(result)
                                             / row["ring_bytes"])


def steps_of(result) -> int:
    return result["config"]["bottleneck"]["steps"]


def test_step_times_are_ratios_to_data_parallel(quick):
    out, result, _ = quick
    printed = table_rows(out, "1. step time")
    assert [r[1] for r in printed] == ["sync", "dp", "ssp", "sync", "sync", "dp", "ssp", "ssp"]
    for row in result["speed"]:
        assert row["ms"] > 0 and row["steps_per_s"] == pytest.approx(1e3 / row["ms"])
        dp = next(r for r in result["speed"] if r["ranks"] == row["ranks"]
                  and r["contender"] == "dp")
        assert row["vs_dp"] == pytest.approx(dp["ms"] / row["ms"])


def test_staleness_stays_within_each_bound_and_every_push_is_applied(quick):
    _, result, _ = quick
    cfg = result["config"]["staleness"]
    steps, workers = cfg["steps"], cfg["workers"]
    rows = {r["key"]: r for r in result["staleness"]}
    assert list(rows) == [f"ssp{t}" for t in cfg["taus"]] + ["async"]
    for key, row in rows.items():
        assert row["pushes"] == row["sent"] == workers * steps
        assert sum(row["staleness"].values()) == row["pushes"]
        if key.startswith("ssp"):
            assert row["max"] <= int(key[3:])
            assert row["updates"] == steps  # one update per clock
        else:
            assert row["updates"] == workers * steps  # one per push
    assert rows["ssp0"]["staleness"] == {"0": workers * steps}
    by_run = {}
    for row in result["workers"]:
        by_run.setdefault(row["contender"], []).append(row)
        assert row["steps_per_s"] > 0 and row["wait_ms"] >= 0 and 0 <= row["wait_share"] <= 1
    for run in by_run.values():
        assert [r["worker"] for r in run] == list(range(workers))
        assert [r["slowed"] for r in run] == [True] + [False] * (workers - 1)


def test_loss_runs_apply_their_updates_and_evaluate(quick):
    out, result, _ = quick
    cfg = result["config"]["loss"]
    steps, workers, warmup = cfg["steps"], cfg["workers"], cfg["warmup"]
    rows = {r["contender"]: r for r in result["loss"]}
    assert rows["sync"]["updates"] == steps
    assert rows["async (τ=∞)"]["updates"] == workers * steps
    assert rows["sync-then-async"]["updates"] == warmup + workers * (steps - warmup)
    assert rows["sync"]["stale_max"] is None and rows["sync-then-async"]["stale_max"] >= 0
    every = cfg["eval_every"]
    for rounds in result["results"]["loss"]["runs"].values():
        assert len(rounds) == cfg["rounds"]
        for run in rounds:  # every few clocks, and after the shutdown
            assert [k for k, _ in run["evals"]] == [*range(every - 1, steps, every), steps]
            assert all(math.isfinite(loss) for _, loss in run["evals"])
    assert len(result["levels"]) == 3 and result["levels"] == sorted(result["levels"],
                                                                     reverse=True)
    assert len(table_rows(out, "3. loss against wall-clock")) == 3
    names = {"sync": "sync", "async": "async (τ=∞)", "sync-then-async": "sync-then-async"}
    for key, rounds in result["results"]["loss"]["runs"].items():  # each one's shortest round
        row = next(r for r in result["loss"] if r["contender"] == names[key])
        assert row["seconds"] == min(map(run_seconds, rounds))


def test_figures_and_timelines_are_written(quick):
    _, result, figures = quick
    for name in ("sync", "ssp1", "async"):
        assert (figures / f"ps_timeline_{name}.trace.json").exists()
    if importlib.util.find_spec("matplotlib") is None:
        assert result["figures"] == []
        return
    assert sorted(os.path.basename(f) for f in result["figures"]) == sorted(
        ["ps_bottleneck.png", "ps_staleness.png", "ps_loss_time.png", "ps_timeline_sync.png",
         "ps_timeline_ssp1.png", "ps_timeline_async.png"])


def test_the_stand_in_gradient_is_exact_and_its_sleep_scales_with_rows():
    model = StandIn(ps.QUICK_BOTTLENECK["sizes"], per_row_s=1e-5, forward_share=0.5)
    batch = np.arange(6)
    loss = loss_fn(model, batch, reduction="sum")
    loss.backward()
    for p, d in zip(model.parameters(), model._directions):
        np.testing.assert_allclose(p.grad, count_fn(batch) * d, rtol=1e-6)
    expected = count_fn(batch) * sum(float(np.vdot(d, p.data)) for d, p in
                                     zip(model._directions, model.parameters()))
    assert float(loss.data) == pytest.approx(expected, rel=1e-5)
    assert model.compute_s(6) == pytest.approx(6e-5)
