"""``python -m scratchpar.batch steps``: each batch's best rate by its steps to the target,
a rate that cannot beat the best before it stopped at that count, and the quick command's
regimes fitted and drawn, with the planner's time to the target beside a run's."""

import json

import pytest

from scratchpar.batch import steps
from scratchpar.batch.__main__ import main

PNG = b"\x89PNG\r\n\x1a\n"


def test_each_rate_runs_at_most_the_best_steps_before_it(monkeypatch):
    asked = []
    took = {1e-3: 300, 3e-3: 120, 1e-2: None}  # the third never meets the target

    def fake(flags, batch, lr, target, most, every):
        asked.append((lr, most, every))
        met = took[lr] if took[lr] is not None and took[lr] <= most else None
        return {"lr": lr, "steps": met, "b_simple": 10.0}

    monkeypatch.setattr(steps, "steps_to", fake)
    monkeypatch.setattr(steps, "floor_of", lambda flags: 1.0)
    found = steps.sweep([], [8], [1e-3, 3e-3, 1e-2], gap=0.5, most=1000, rows=36)
    assert found["target"] == 1.5
    assert asked == [(1e-3, 1000, 5), (3e-3, 300, 5), (1e-2, 120, 5)]  # 5 steps of 8: 40 rows
    (row,) = found["rows"]
    assert row["best"] == {"seed": 0, "lr": 3e-3, "steps": 120, "b_simple": 10.0}
    assert [r["steps"] for r in row["seeds"][0]["runs"]] == [300, 120, None]


def test_a_reading_covers_the_rows_asked_in_whole_steps():
    assert [steps.every_for(b, 64) for b in (1, 4, 5, 64, 256)] == [64, 16, 13, 1, 1]


def test_the_batch_s_figure_is_the_median_seed_s_a_miss_counting_as_slowest(monkeypatch):
    took = {"0": 90, "1": 70, "2": None}  # by seed; seed 2 never meets the target

    def fake(flags, batch, lr, target, most, every):
        return {"lr": lr, "steps": took[flags[flags.index("--seed") + 1]], "b_simple": 5.0}

    monkeypatch.setattr(steps, "steps_to", fake)
    monkeypatch.setattr(steps, "floor_of", lambda flags: 0.0)
    (row,) = steps.sweep([], [4], [1e-3], gap=1.0, most=100, rows=4, seeds=3)["rows"]
    assert row["best"] == {"seed": 0, "lr": 1e-3, "steps": 90, "b_simple": 5.0}
    took["0"] = None  # two of three miss: the median seed missed
    (row,) = steps.sweep([], [4], [1e-3], gap=1.0, most=100, rows=4, seeds=3)["rows"]
    assert row["best"] is None
    assert steps.median_steps([None, 40, 10]) == 40 and steps.median_steps([None, None, 3]) is None


def test_the_quick_study_meets_its_targets_fits_and_draws(tmp_path):
    out, figures = tmp_path / "s.json", tmp_path / "figures"
    assert main(["steps", "--quick", "--json", str(out), "--figures", str(figures)]) == 0
    found = json.loads(out.read_text())["models"]
    assert set(found) == {"gpt", "mlp"}
    for summary in found.values():
        assert all(r["best"] is not None for r in summary["rows"])  # every batch met it
        assert summary["s_min"] > 0 and summary["b_crit"] > 0 and summary["b_simple"] > 0
        for r in summary["rows"]:
            (seed,) = r["seeds"]  # one seed in the quick study
            assert r["best"]["steps"] == min(x["steps"] for x in seed["runs"] if x["steps"])
    checks = json.loads(out.read_text())["checks"]  # the planner's time beside a run's
    assert [c["batch"] for c in checks] == [4, 64]  # nearest B_crit, and the largest
    gpt = found["gpt"]
    for check in checks:  # the fitted S = S_min + E_min/B steps of the planner's step
        fitted = gpt["s_min"] + gpt["e_min"] / check["batch"]
        assert check["steps"] == pytest.approx(fitted) and check["step_s"] > 0
        assert check["seconds"] == pytest.approx(check["step_s"] * fitted)
        assert check["measured_s"] > 0 and check["measured_steps"] is not None  # it met it
    assert (figures / "batch_steps.png").read_bytes()[:8] == PNG
