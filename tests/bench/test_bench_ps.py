"""``python -m scratchpar.bench ps``: a tiny run of every part end to end, its exact counts."""

import importlib.util
import math
import os

import numpy as np
import pytest
from bench_helpers import run_quick, table_rows

from scratchpar.bench.ps import driver as ps
from scratchpar.bench.ps.driver import HEADER_BYTES, LEVELS, run_seconds
from scratchpar.bench.standin import calibration_line, sleeping_mlp
from scratchpar.data.shard import rows


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
        k, s, w = row["K"], row["S"], row["W"]
        assert [int(c) for c in cells[3:6]] == [k, row["server B"], row["protocol B"]]
        report = result["results"]["bottleneck"][str(row["ranks"])]["family"][str(s)]["report"]
        protocol = ps.protocol_bytes(k, itemsize, s, w, steps)  # each server's
        if s == 1:  # K·itemsize both ways per worker and step, and a header each time
            assert protocol == [2 * k * itemsize * steps * w + HEADER_BYTES * w * (steps + 1)]
        assert len(protocol) == s
        ranges = [(b - HEADER_BYTES * w * (steps + 1)) / (2 * itemsize * steps * w)
                  for b in protocol]  # each server's parameters, both ways, every step
        assert all(r == int(r) > 0 for r in ranges) and sum(ranges) == k  # the ranges cut K
        assert report["bytes"] == protocol  # every server, to the byte
        assert [row["server B"], row["protocol B"]] == [max(protocol)] * 2  # the busiest
        assert report["pushes"] == w * steps  # every push applied


def test_the_ring_moves_its_formulas_bytes(quick):
    _, result, _ = quick
    steps = result["config"]["bottleneck"]["steps"]
    for row in result["bytes"]:
        k, p = row["K"], row["ranks"]
        ring = 2 * 2 * (p - 1) / p * k * 4  # each way: reduce-scatter and all-gather, float32
        assert row["2·2(P−1)/P·K·b"] == round(ring)
        assert abs(row["ring B/step"] - ring) <= 4 * 4  # the chunks differ by one element
        raw = result["results"]["bottleneck"][str(p)]["ring"]
        assert row["ring B/step"] == max(r["sent"] + r["received"] for r in raw)
        # the busiest server's bytes a step over the ring's, both by their formulas
        protocol = ps.protocol_bytes(k, 4, row["S"], row["W"], steps)
        assert row["server/ring"] == pytest.approx(max(protocol) / steps / ring,
                                                   rel=4 * 4 / ring)


def test_step_times_are_ratios_to_data_parallel(quick):
    out, result, _ = quick
    printed = table_rows(out, "1. step time")
    assert [r[1] for r in printed] == ["sync", "dp", "ssp", "sync", "sync", "dp", "ssp", "ssp"]
    steps = result["config"]["bottleneck"]["steps"]
    for row in result["speed"]:
        raw = result["results"]["bottleneck"][str(row["ranks"])]
        for t in raw["timed"].values():  # each contender's median of its samples
            assert t["median_s"] == pytest.approx(np.median(t["samples_s"]))
        seconds = {name: t["median_s"] for name, t in raw["timed"].items()}
        seconds.update({f"ssp τ=0 S={s}": f["seconds"] / steps  # back to back: a step's share
                        for s, f in raw["family"].items()})
        assert row["steps/s"] == pytest.approx(1 / seconds[row["contender"]])
        assert row["× dp"] == pytest.approx(seconds["dp"] / seconds[row["contender"]])


def test_staleness_stays_within_each_bound_and_every_push_is_applied(quick):
    _, result, _ = quick
    cfg = result["config"]["staleness"]
    steps, workers = cfg["steps"], cfg["workers"]
    rows = result["staleness"]
    assert list(rows) == [c["name"] for c in cfg["contenders"]]
    assert [c["mode"] for c in cfg["contenders"]] == ["ssp"] * 4 + ["async"]
    for c in cfg["contenders"]:
        row, ranks = rows[c["name"]], result["results"]["staleness"]["runs"][c["name"]]
        report = ranks[0]["report"]  # server 0's
        assert report["pushes"] == sum(len(r["ends_s"]) for r in ranks[1:]) == workers * steps
        assert row["histogram"] == report["staleness_histogram"]
        hist = {int(s): n for s, n in report["staleness_histogram"].items()}
        assert sum(hist.values()) == report["pushes"]
        assert row["stale mean"] == pytest.approx(sum(s * n for s, n in hist.items())
                                                  / report["pushes"])
        assert row["stale max"] == max(hist)
        if c["mode"] == "ssp":
            assert row["stale max"] <= c["staleness"]
            assert row["updates"] == steps  # one update per clock
        else:
            assert row["updates"] == workers * steps  # one per push
        assert [r["worker"] for r in ranks] == [None] + list(range(workers))
        assert [r["slowed"] for r in ranks[1:]] == [True] + [False] * (workers - 1)
        for r in ranks[1:]:  # a pull's wait every step
            assert len(r["metrics"]["wait_s"]) == len(r["ends_s"]) == steps
        slowed, *others = ranks[1:]
        assert row["slowed steps/s"] == pytest.approx(steps / slowed["ends_s"][-1])
        assert row["others steps/s"] == pytest.approx(
            np.mean([steps / r["ends_s"][-1] for r in others]))
        assert row["others wait ms"] == pytest.approx(
            np.mean([1e3 * sum(r["metrics"]["wait_s"]) / steps for r in others]))
        shares = [sum(r["metrics"]["wait_s"]) / r["ends_s"][-1] for r in others]
        assert row["others wait share"] == pytest.approx(np.mean(shares))
        assert all(share <= 1 for share in shares)
    assert rows["ssp0"]["histogram"] == {"0": workers * steps}


def test_loss_runs_apply_their_updates_and_evaluate(quick):
    out, result, _ = quick
    cfg = result["config"]["loss"]
    steps, workers, warmup = cfg["steps"], cfg["workers"], cfg["warmup"]
    rows = result["loss"]
    assert rows["sync"]["updates"] == steps
    assert rows["async"]["updates"] == workers * steps
    assert rows["sync-then-async"]["updates"] == warmup + workers * (steps - warmup)
    fastest = {key: min(rounds, key=run_seconds)
               for key, rounds in result["results"]["loss"]["runs"].items()}
    assert rows["sync"]["stale max"] is None and fastest["sync"]["ranks"][0]["report"] is None
    for key in ("async", "sync-then-async"):  # server 0's histogram of the run shown
        report = fastest[key]["ranks"][0]["report"]
        hist = {int(s): n for s, n in report["staleness_histogram"].items()}
        assert sum(hist.values()) == report["pushes"] == workers * steps  # every push counted
        row = rows[key]
        assert row["stale max"] == max(hist)
        assert row["stale mean"] == pytest.approx(sum(s * n for s, n in hist.items())
                                                  / report["pushes"])
    warm = fastest["sync-then-async"]["ranks"][0]["report"]["staleness_histogram"]
    assert warm["0"] >= warmup * workers  # the synchronous clocks' pushes are never stale
    every = cfg["eval_every"]
    for rounds in result["results"]["loss"]["runs"].values():
        assert len(rounds) == cfg["rounds"]
        for run in rounds:  # every few clocks, and after the shutdown
            assert [k for k, _ in run["evals"]] == [*range(every - 1, steps, every), steps]
            assert all(math.isfinite(loss) for _, loss in run["evals"])
    best = min(run["evals"][-1][1] for run in fastest.values())  # the best final loss
    initial = result["initial"]
    assert result["levels"] == pytest.approx([initial - q * (initial - best) for q in LEVELS])
    assert len(table_rows(out, "3. loss against wall-clock")) == 3
    for key, rounds in result["results"]["loss"]["runs"].items():  # each one's shortest round
        row = rows[key]
        assert row["run s"] == min(map(run_seconds, rounds))
        assert row["final held-out"] == fastest[key]["evals"][-1][1]
        server = fastest[key]["ranks"][0]  # each evaluation at its clock's end, the last at done
        points = [(server["ends_s"][k] if k < steps else server["done_s"], loss)
                  for k, loss in fastest[key]["evals"]]
        for i, level in enumerate(result["levels"]):  # the first evaluation at or below it
            assert row[f"L{i} s"] == next((t for t, loss in points if loss <= level), None)


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


def test_the_stand_in_gradient_is_exact_and_its_sleep_scales_with_rows(monkeypatch):
    slept = []
    monkeypatch.setattr("scratchpar.bench.standin.pause", slept.append)
    task = sleeping_mlp({"sizes": ps.QUICK["bottleneck"]["sizes"], "per_row_s": 1e-5,
                         "forward_share": 0.5})
    batch = (np.arange(6),)
    loss = task.loss(task.model, batch, reduction="sum")
    loss.backward()
    for p, d in zip(task.model.parameters(), task.directions):
        np.testing.assert_allclose(p.grad, rows(batch) * d, rtol=1e-6)
    expected = rows(batch) * sum(float(np.vdot(d, p.data)) for d, p in
                                 zip(task.directions, task.model.parameters()))
    assert float(loss.data) == pytest.approx(expected, rel=1e-5)
    assert sum(slept) == pytest.approx(6e-5) and slept[0] == pytest.approx(slept[1])


def test_each_calibration_is_printed_as_one_line(quick):
    out, result, _ = quick
    for part, calib in result["calibration"].items():
        cfg = result["config"][part]
        assert (calib["sizes"], calib["rows"]) == (cfg["sizes"], cfg["calibrate_rows"])
        assert calibration_line(part, calib) in out.splitlines()
    assert calibration_line("bottleneck", {"sizes": [16, 32, 8], "rows": 4, "parameters": 1234,
                                           "per_row_s": 1.25e-5}) == (
        "stand-in compute (bottleneck): MLP 16→32→8 (K = 1,234) calibrated on the CPU at 4 "
        "rows: 12.50 µs per row")
