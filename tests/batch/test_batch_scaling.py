"""``python -m scratchpar.batch scaling``: at a fixed number of examples, each batch's steps and
scaled rate follow the rule, the base batch's two arms are one run, and the figure is drawn."""

import json

import pytest

from scratchpar.batch import scaling
from scratchpar.batch.__main__ import main

PNG = b"\x89PNG\r\n\x1a\n"


def test_the_rate_scales_as_the_batch_and_the_steps_as_its_inverse(monkeypatch):
    ran = []
    monkeypatch.setattr(scaling, "final_loss",
                        lambda flags, batch, lr, steps: ran.append((batch, lr, steps)) or 1.0)
    rows = scaling.sweep([], [8, 32, 128], base_lr=0.05, examples=1024)
    assert [(r["batch"], r["steps"]) for r in rows] == [(8, 128), (32, 32), (128, 8)]
    assert [r["scaled_lr"] for r in rows] == pytest.approx([0.05, 0.2, 0.8])
    assert ran == [(8, 0.05, 128), (8, 0.05, 128), (32, 0.2, 32), (32, 0.05, 32),
                   (128, 0.8, 8), (128, 0.05, 8)]


def test_the_quick_rule_runs_and_draws(tmp_path):
    out, figures = tmp_path / "s.json", tmp_path / "figures"
    assert main(["scaling", "--quick", "--json", str(out), "--figures", str(figures)]) == 0
    found = json.loads(out.read_text())
    base = found["rows"][0]
    assert base["scaled"] == base["fixed"]  # the base batch's arms are the same run
    assert all(r["scaled"] > found["floor"] and r["fixed"] > found["floor"]
               for r in found["rows"])
    assert (figures / "batch_scaling.png").read_bytes()[:8] == PNG
