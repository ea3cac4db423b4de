"""The loss-curve picture is drawn from a metrics file, including a resumed run's."""

import dataclasses
import json

import pytest

from scratchpar.trace.__main__ import main
from scratchpar.trace.loss_plot import read_metrics
from scratchpar.train import build_trainer


def test_resumed_metrics_read_as_one_run(tmp_path, tiny_config):
    cfg = tiny_config()
    stopped = dataclasses.replace(cfg, train=dataclasses.replace(
        cfg.train, stop_after=5, save=str(tmp_path / "ck")))
    build_trainer(stopped).run()
    resumed = dataclasses.replace(cfg, train=dataclasses.replace(
        cfg.train, resume=str(tmp_path / "ck")))
    summary = build_trainer(resumed).run()
    start, steps, final, skips = read_metrics(cfg.train.metrics)
    assert skips == []
    assert start["step"] == 0 and start["floor"] == summary["floor"]
    assert [r["step"] for r in steps] == [3, 5, 6, 9, 10]
    assert final["step"] == 10 and final["eval_loss"] == summary["eval_loss"]


def test_plot_writes_a_png(tmp_path, tiny_config):
    pytest.importorskip("matplotlib")
    cfg = tiny_config()
    build_trainer(cfg).run()
    out = tmp_path / "loss.png"
    assert main(["loss", cfg.train.metrics, "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_metrics_file_is_a_clear_error(tmp_path, capsys):
    assert main(["loss", str(tmp_path / "absent.jsonl")]) == 2
    assert "absent.jsonl" in capsys.readouterr().err


def test_skipped_steps_are_read_and_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    records = [{"event": "start", "step": 0, "unit": "tok", "floor": 1.0},
               {"event": "skip", "step": 2}, {"event": "skip", "step": 3},
               {"event": "step", "step": 4, "loss": None, "skipped": 2},
               {"event": "step", "step": 8, "loss": 2.5, "skipped": 0},
               {"event": "final", "step": 8, "eval_loss": "nan"}]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert read_metrics(path)[3] == [2, 3]
    assert main(["loss", str(path), "-o", str(tmp_path / "loss.png")]) == 0
