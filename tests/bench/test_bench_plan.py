"""``python -m scratchpar.bench plan``: every layout runnable here predicted beside measured,
the errors summed up right, and Kendall's τ by hand."""

import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from bench_helpers import run_quick, table_rows

from scratchpar.bench.plan.driver import (
    QUICK_RUN,
    QUICK_TIMING,
    draw,
    kendall_tau,
    real_ranks,
    summary,
    verdicts,
    with_errors,
    world,
)
from scratchpar.bench.standin import SleepingTask, stands_in
from scratchpar.device_rng import DeviceRandom
from scratchpar.plan.layouts import layouts
from scratchpar.plan.predict import predict
from scratchpar.plan.profile import dump, load, loads
from scratchpar.train import load_config
from scratchpar.train.memory import estimate, measurable
from scratchpar.train.task import build_task

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return run_quick("plan", tmp_path_factory.mktemp("plan-bench"))


def test_every_layout_of_each_world_is_predicted_and_measured(quick):
    out, result, figures = quick
    real = real_ranks("cpu")
    for n in result["ranks"]:
        want = [list(lay.flags) for lay in layouts(QUICK_RUN, n)
                if n <= real or stands_in(lay.cfg)]
        assert [r["flags"] for r in result["rows"] if r["ranks"] == n] == want
    for row in result["rows"]:
        assert row["not_run"] is None, row
        assert row["measured_s"] > 0 and row["predicted_s"] > 0 and row["predicted_bytes"] > 0
        assert row["standin"] == (row["ranks"] > real)
        if row["standin"]:  # it sleeps for the compute it was priced with, allocating nothing
            assert row["seconds"] and row["memory_error"] is None
        else:
            assert row["measured_bytes"] > 0
    assert (figures / "plan_validation.png").read_bytes()[:8] == PNG


def test_each_prediction_is_the_planners_on_the_profile_and_compute_it_recorded(quick):
    """The figures beside the measured ones are the planner's for that layout on that world:
    its memory estimate, and its step on the world's profile and the compute it priced
    (a pipeline's and a hybrid's stage shares are timed in the job, not recorded)."""
    _, result, _ = quick
    checked = set()
    for row in result["rows"]:
        n = row["ranks"]
        cfg = load_config([*result["run"], *row["flags"]], world_size=n)
        assert row["predicted_bytes"] == measurable(cfg, estimate(cfg, n, bound=False))
        if row["strategy"] not in ("pipeline", "hybrid"):
            priced = {rows: (forward, backward) for rows, forward, backward in row["seconds"]}
            step = predict(cfg, n, loads(result["profiles"][str(n)], "profile"), priced.get)
            assert row["predicted_s"] == pytest.approx(step.step_s, rel=1e-12)
            checked.add(n)
    assert checked == set(result["ranks"])


def test_the_summary_and_its_verdicts_are_the_rows(quick):
    out, result, _ = quick
    rows, found = result["rows"], result["summary"]
    step = [abs(r["predicted_s"] / r["measured_s"] - 1) for r in rows]
    memory = [abs(r["predicted_bytes"] / r["measured_bytes"] - 1) for r in rows
              if r.get("measured_bytes")]  # real compute: a stand-in allocates nothing
    assert found["layouts"] == len(rows) and len(memory) == sum(not r["standin"] for r in rows)
    assert found["step median"] == pytest.approx(statistics.median(step))
    assert found["step worst"] == pytest.approx(max(step))
    assert found["memory median"] == pytest.approx(statistics.median(memory))
    assert found["tau"] == pytest.approx(kendall_tau([r["predicted_s"] for r in rows],
                                                     [r["measured_s"] for r in rows]))
    for n in result["ranks"]:
        mine = [r for r in rows if r["ranks"] == n]
        assert found["tau_by_ranks"][str(n)] == pytest.approx(kendall_tau(
            [r["predicted_s"] for r in mine], [r["measured_s"] for r in mine]), nan_ok=True)
    printed = [" ".join(r) for r in table_rows(out, "errors over")]
    assert printed == [f"{v['target']} {v['measured']:.2f} {v['verdict']}"
                       for v in verdicts(found, "cpu")]


def test_each_target_is_judged_in_its_direction_bound_included():
    found = {"step median": 0.1, "step worst": 0.26, "memory median": 0.05, "tau": 0.8,
             "profile alone median": 0.4, "profile alone worst": 0.25}
    judged = {v["target"]: v["verdict"] for v in verdicts(found, "cpu")}
    assert judged == {"step median ≤ 0.1": "PASS", "step worst ≤ 0.25": "MISS",
                      "memory median ≤ 0.05": "PASS", "tau ≥ 0.8": "PASS",
                      "profile alone median ≤ 0.1": "MISS",
                      "profile alone worst ≤ 0.25": "PASS"}
    judged = {v["target"]: v["verdict"] for v in verdicts({**found, "step median": 0.11,
                                                           "tau": 0.79}, "cpu")}
    assert judged["step median ≤ 0.1"] == "MISS" and judged["tau ≥ 0.8"] == "MISS"
    assert {v["verdict"] for v in verdicts(found, "double")} == {"n/a (double)"}


def test_the_summary_takes_medians_and_the_worst_of_the_absolute_errors():
    rows = with_errors([
        {"ranks": 1, "predicted_s": 1.1, "measured_s": 1.0, "predicted_bytes": 90,
         "measured_bytes": 100, "profile_s": 0.5},
        {"ranks": 1, "predicted_s": 1.5, "measured_s": 2.0, "predicted_bytes": 100,
         "measured_bytes": 100, "profile_s": 1.0},
        {"ranks": 2, "predicted_s": 3.0, "measured_s": 2.0, "predicted_bytes": 104,
         "measured_bytes": 100, "profile_s": 2.2},
        {"ranks": 3, "predicted_s": 1.0, "measured_s": 1.0, "predicted_bytes": 100,
         "profile_s": 0.9},
        {"ranks": 2, "not_run": "too big"}])
    found = summary(rows)
    assert found["layouts"] == 4 and rows[3]["memory_error"] is None
    assert found["step median"] == pytest.approx((0.1 + 0.25) / 2)
    assert found["step worst"] == pytest.approx(0.5)
    assert found["memory median"] == pytest.approx(0.04)
    assert found["profile alone median"] == pytest.approx((0.1 + 0.5) / 2)
    assert found["profile alone worst"] == pytest.approx(0.5)


def test_stand_ins_alone_leave_memory_unjudged_and_still_draw(tmp_path):
    pytest.importorskip("matplotlib")
    rows = with_errors([{"ranks": n, "strategy": "dp", "predicted_s": p, "measured_s": 1.0,
                         "predicted_bytes": 100, "profile_s": p}
                        for n, p in ((4, 0.8), (8, 0.7), (8, 0.9))])
    found = summary(rows)
    assert math.isnan(found["memory median"])
    judged = {v["target"]: v["verdict"] for v in verdicts(found, "cuda")}
    assert judged["memory median ≤ 0.05"] == "n/a (not measured)"
    assert judged["step worst ≤ 0.25"] == "MISS"
    (png,) = draw(str(tmp_path), rows)
    assert Path(png).read_bytes().startswith(PNG)


def test_kendall_tau_by_hand():
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau([1, 2, 3, 4], [40, 30, 20, 10]) == -1.0
    assert kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)  # 2 agree, 1 disagrees
    # ties in x drop out: pairs (1,2) tied; of the other two, both agree → 2/√(2·3)
    assert kendall_tau([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6))
    assert math.isnan(kendall_tau([1, 1], [1, 2]))


def test_a_full_run_measures_each_layout_in_a_job_of_its_own():
    profile = dump(load("scratchpar/plan/profiles/dgx-h100.toml"))
    alone = world(1, QUICK_RUN, profile, QUICK_TIMING, "cpu", together=False)
    assert [r["flags"] for r in alone] == [list(lay.flags) for lay in layouts(QUICK_RUN, 1)]
    assert all(r["measured_s"] > 0 and r["measured_bytes"] > 0 and r["predicted_s"] > 0
               for r in alone)
    assert all(r["rounds_s"] == [r["measured_s"]] for r in alone)  # a job a round


def test_a_stand_in_sleeps_its_rows_share_and_its_gradients_are_exact(monkeypatch):
    """The stand-in's loss sleeps its rows' share of the priced compute, each way, and gives
    each parameter of the real model scale · dᵢ: the strategy moves the real bytes."""
    slept = []
    monkeypatch.setattr("scratchpar.bench.standin.pause", slept.append)
    cfg = load_config(QUICK_RUN)
    task = build_task(cfg, DeviceRandom(0, 1))
    sleeping = SleepingTask(task.dataset, task.model, task.unit, task.criterion, task.measure,
                            per_row_s=0.004, forward_share=0.25)
    batch, units = sleeping.batch(0, 4)
    sleeping.loss(task.model, batch, reduction="sum").backward()
    assert slept == [pytest.approx(0.004), pytest.approx(0.012)]
    for p, d in zip(task.model.parameters(), sleeping.directions):
        np.testing.assert_allclose(p.grad, units * d, rtol=1e-6)


@pytest.mark.parametrize("flags, stood", [
    (["--strategy", "dp"], True), (["--strategy", "zero", "--zero-stage", "2"], True),
    (["--strategy", "zero", "--zero-stage", "3"], False), (["--strategy", "ps"], True),
    (["--strategy", "pipeline", "--pp", "2"], False), (["--strategy", "hybrid", "--tp", "2"],
                                                        False)])
def test_a_stand_in_takes_the_layouts_that_run_the_whole_model_through_the_loss(flags, stood):
    assert stands_in(load_config([*QUICK_RUN, *flags], world_size=2)) == stood


def test_rounds_below_one_are_refused_before_any_job(capsys):
    from scratchpar.bench.plan.driver import BENCHMARK
    from scratchpar.jobs.harness import main

    with pytest.raises(SystemExit, match="--rounds must be ≥ 1, got 0"):
        main({"plan": BENCHMARK}, ["plan", "--rounds", "0"])
    assert "plan:" not in capsys.readouterr().err  # no job was launched
