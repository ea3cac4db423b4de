"""``python -m scratchpar.bench plan``: every layout runnable here predicted beside measured,
the errors summed up right, and Kendall's τ by hand."""

import math

import pytest
from bench_helpers import run_quick

from scratchpar.bench.plan.driver import (
    QUICK_RUN,
    QUICK_TIMING,
    kendall_tau,
    summary,
    with_errors,
    world,
)
from scratchpar.plan.layouts import layouts
from scratchpar.plan.profile import dump, load

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return run_quick("plan", tmp_path_factory.mktemp("plan-bench"))


def test_every_layout_of_each_world_is_predicted_and_measured(quick):
    out, result, figures = quick
    for n in result["ranks"]:
        want = [list(lay.flags) for lay in layouts(QUICK_RUN, n)]
        assert [r["flags"] for r in result["rows"] if r["ranks"] == n] == want
    for row in result["rows"]:
        assert row["not_run"] is None, row
        assert row["measured_s"] > 0 and row["predicted_s"] > 0
        assert row["measured_bytes"] > 0 and row["predicted_bytes"] > 0
        assert row["step_error"] == pytest.approx(row["predicted_s"] / row["measured_s"] - 1)
    assert "step median ≤ 0.1" in out and "tau ≥ 0.8" in out
    assert (figures / "plan_validation.png").read_bytes()[:8] == PNG


def test_the_summary_takes_medians_and_the_worst_of_the_absolute_errors():
    rows = with_errors([
        {"ranks": 1, "predicted_s": 1.1, "measured_s": 1.0, "predicted_bytes": 90,
         "measured_bytes": 100},
        {"ranks": 1, "predicted_s": 1.5, "measured_s": 2.0, "predicted_bytes": 100,
         "measured_bytes": 100},
        {"ranks": 2, "predicted_s": 3.0, "measured_s": 2.0, "predicted_bytes": 104,
         "measured_bytes": 100},
        {"ranks": 2, "not_run": "too big"}])
    found = summary(rows)
    assert found["layouts"] == 3
    assert found["step median"] == pytest.approx(0.25) and found["step worst"] == pytest.approx(0.5)
    assert found["memory median"] == pytest.approx(0.04)


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
