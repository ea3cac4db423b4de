"""Divergence: skipped steps are recorded, only a run of --max-bad-steps in a row stops training
(exit 3 from the CLI, with what to change), and a finite step resets the count."""

import dataclasses
import json
import subprocess
import sys

import pytest

from scratchpar.parallel.strategy import Strategy
from scratchpar.train import build_trainer
from scratchpar.train.divergence import Diverged
from scratchpar.train.loop import Trainer


class Scripted(Strategy):
    """A strategy whose step ``i`` is skipped when ``pattern[i]`` is "x" (applied for "."), or
    skipped as a loss scale's overflow for "o"; "i": the rank sat the step out, repeating its
    last step's metrics (a round-robin worker waiting for its turn)."""

    def __init__(self, model, optimizer, objective, pattern: str):
        super().__init__(model, lambda params: optimizer, objective, None)
        self.pattern, self.calls = pattern, 0

    @classmethod
    def describe(cls, shape, world, **knobs):
        raise AssertionError("the loop never asks a strategy to describe itself")

    def step(self, batch) -> dict:
        said = self.pattern[self.calls]
        self.calls += 1
        if said == "o":
            return {"loss": 1.0, "grad_norm": float("inf"), "skipped": True, "overflow": True}
        if said == "p":  # PipeDream's: a stage's update skipped, no one norm for the step
            return {"loss": 1.0, "skipped": True}
        if said == "i":
            return {**self.last, "idle": True}
        bad = said == "x"
        self.last = {"loss": float("nan") if bad else 1.0, "grad_norm": 2.0, "skipped": bad}
        return self.last


def scripted_run(tiny_config, pattern: str, limit: int):
    cfg = tiny_config()
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(
        cfg.train, steps=len(pattern), max_bad_steps=limit, log_every=4))
    real = build_trainer(cfg)
    strategy = Scripted(real.strategy.model, real.strategy.optimizer, real.task, pattern)
    trainer = Trainer(cfg, strategy, real.task, real.schedule, real.dropout_gen)
    records = lambda: [json.loads(line) for line in open(cfg.train.metrics)]  # noqa: E731
    return trainer, records


def test_skips_short_of_the_limit_are_recorded_and_training_goes_on(tiny_config):
    trainer, records = scripted_run(tiny_config, ".xx.xx.x..", limit=3)
    summary = trainer.run()
    assert summary["skipped_steps"] == 5 and summary["step"] == 10
    log = records()
    skips = [r for r in log if r["event"] == "skip"]
    assert [(r["step"], r["in_a_row"]) for r in skips] == [(2, 1), (3, 2), (5, 1), (6, 2), (8, 1)]
    assert all(r["loss"] == "nan" and r["grad_norm"] == 2.0 for r in skips)  # strict JSON
    windows = [r for r in log if r["event"] == "step"]
    assert [(r["step"], r["skipped"], r["loss"]) for r in windows] == \
        [(4, 2, 1.0), (8, 3, 1.0), (10, 0, 1.0)]  # the loss of the applied steps only


def test_the_limit_in_a_row_stops_every_rank_with_what_to_change(tiny_config):
    trainer, records = scripted_run(tiny_config, "..x.xxx...", limit=3)
    with pytest.raises(Diverged) as err:
        trainer.run()
    assert trainer.step == 7
    message = str(err.value)
    assert message.startswith("training diverged: steps 5-7 (3 in a row, --max-bad-steps 3)")
    assert "The loss went from 1 at step 4, the last step applied, to nan at step 7 (gradient " \
           "norm 2, learning rate" in message
    for knob in ("--lr", "--warmup", "--grad-clip"):
        assert knob in message
    assert records()[-1] == {"event": "diverged", "step": 7}


def test_a_run_that_never_applied_a_step_says_so(tiny_config):
    trainer, _ = scripted_run(tiny_config, "xxx...", limit=3)
    with pytest.raises(Diverged, match=r"training diverged: steps 1-3 \(3 in a row, "
                       r"--max-bad-steps 3\) had a non-finite loss or gradient, and each was "
                       r"skipped\. No step was applied: step 3 had loss nan \(gradient norm 2, "):
        trainer.run()


def test_a_window_of_skipped_steps_only_has_no_loss(tiny_config):
    trainer, records = scripted_run(tiny_config, "xxxx....", limit=5)
    trainer.run()
    assert [(r["step"], r["skipped"], r["loss"]) for r in records() if r["event"] == "step"] == \
        [(4, 4, None), (8, 0, 1.0)]


def test_a_huge_learning_rate_exits_3_with_one_clear_message(tmp_path):
    out = subprocess.run([sys.executable, "-m", "scratchpar.train", "--lr", "1e6", "--steps",
                          "60", "--no-progress", "--metrics", str(tmp_path / "m.jsonl")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out.stderr
    assert out.stderr.count("scratchpar.train: training diverged") == 1
    assert "Lower --lr (now 1e+06)" in out.stderr
    assert "Traceback" not in out.stderr and "Warning" not in out.stderr
    log = [json.loads(line) for line in open(tmp_path / "m.jsonl")]
    assert log[-1]["event"] == "diverged"
    assert sum(r["event"] == "skip" for r in log) >= 5


def test_overflows_are_recorded_apart_and_never_end_the_run(tiny_config):
    """A loss scale's overflows (Micikevicius et al. 2018, §3.2) are skipped steps, but many in
    a row are the scale finding its level, not divergence; nor do they break a run of bad
    steps."""
    trainer, records = scripted_run(tiny_config, "oooo.xoxo.", limit=3)
    summary = trainer.run()
    assert (summary["skipped_steps"], summary["overflow_steps"], summary["step"]) == (2, 6, 10)
    log = records()
    assert [r["step"] for r in log if r["event"] == "overflow"] == [1, 2, 3, 4, 7, 9]
    assert [(r["step"], r["in_a_row"]) for r in log if r["event"] == "skip"] == [(6, 1), (8, 2)]


def test_a_skip_without_a_norm_is_recorded_without_one(tiny_config):
    trainer, records = scripted_run(tiny_config, "..p.", limit=3)
    trainer.run()
    assert [(r["step"], r["grad_norm"]) for r in records() if r["event"] == "skip"] == [(3, None)]


def test_a_step_a_rank_sat_out_neither_counts_nor_breaks_a_run_of_skips(tiny_config):
    """A round-robin worker repeats its last metrics while the others take their turns: its
    one bad turn is one skip, not one a step until its next turn."""
    trainer, records = scripted_run(tiny_config, "xiixiix.", limit=4)
    summary = trainer.run()
    assert (summary["skipped_steps"], summary["step"]) == (3, 8)
    assert [(r["step"], r["in_a_row"]) for r in records() if r["event"] == "skip"] == \
        [(1, 1), (4, 2), (7, 3)]
