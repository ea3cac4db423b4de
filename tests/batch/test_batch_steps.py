"""``python -m scratchpar.batch steps``: each batch's best rate by its steps to the target,
a rate that cannot beat the best before it stopped at that count, and the quick command's
regimes fitted and drawn, with the planner's time to the target beside a run's."""

import json

from scratchpar.batch import steps
from scratchpar.batch.__main__ import main

PNG = b"\x89PNG\r\n\x1a\n"


def test_each_rate_runs_at_most_the_best_steps_before_it(monkeypatch):
    asked = []
    took = {1e-3: 300, 3e-3: 120, 1e-2: None}  # the third never meets the target

    def fake(flags, batch, lr, target, most, every):
        asked.append((lr, most))
        met = took[lr] if took[lr] is not None and took[lr] <= most else None
        return {"lr": lr, "steps": met, "b_simple": 10.0}

    monkeypatch.setattr(steps, "steps_to", fake)
    monkeypatch.setattr(steps, "floor_of", lambda flags: 1.0)
    found = steps.sweep([], [8], [1e-3, 3e-3, 1e-2], gap=0.5, most=1000, every=5)
    assert found["target"] == 1.5
    assert asked == [(1e-3, 1000), (3e-3, 300), (1e-2, 120)]
    (row,) = found["rows"]
    assert row["best"] == {"lr": 3e-3, "steps": 120, "b_simple": 10.0}
    assert [r["steps"] for r in row["runs"]] == [300, 120, None]


def test_the_quick_study_meets_its_targets_fits_and_draws(tmp_path):
    out, figures = tmp_path / "s.json", tmp_path / "figures"
    assert main(["steps", "--quick", "--json", str(out), "--figures", str(figures)]) == 0
    found = json.loads(out.read_text())["models"]
    assert set(found) == {"gpt", "mlp"}
    for summary in found.values():
        assert all(r["best"] is not None for r in summary["rows"])  # every batch met it
        assert summary["s_min"] > 0 and summary["b_crit"] > 0 and summary["b_simple"] > 0
        for r in summary["rows"]:
            assert r["best"]["steps"] == min(x["steps"] for x in r["runs"] if x["steps"])
    checks = json.loads(out.read_text())["checks"]  # the planner's time beside a run's
    assert [c["batch"] for c in checks] == [4, 64]  # nearest B_crit, and the largest
    for check in checks:
        assert check["seconds"] == check["step_s"] * check["steps"] > 0
        assert check["measured_s"] > 0 and check["measured_steps"] is not None  # it met it
    assert (figures / "batch_steps.png").read_bytes()[:8] == PNG
