"""``--target-loss``: a run stops at the first metrics record whose training loss meets it and
says at which step; a run that never meets it trains every step; the strategies it is not
checked with refuse it."""

import json

import pytest

from scratchpar.train import ConfigError, build_trainer, format_summary, load_config

TINY = ["--strategy", "single", "--d-model", "16", "--n-layers", "1", "--n-heads", "2",
        "--seq-len", "16", "--vocab-size", "8", "--order", "1", "--schedule", "constant",
        "--warmup", "2", "--steps", "60", "--log-every", "5", "--batch-size", "8",
        "--eval-batches", "1", "--no-progress"]


def run(tmp_path, target: str):
    metrics = tmp_path / "m.jsonl"
    summary = build_trainer(load_config([*TINY, f"--target-loss={target}", "--metrics",
                                         str(metrics)])).run()
    steps = [r for r in map(json.loads, metrics.read_text().splitlines())
             if r["event"] == "step"]
    return summary, steps


def test_a_run_stops_at_the_first_record_that_meets_the_target(tmp_path):
    _, free = run(tmp_path, "-1e9")  # never met: every record, to choose a target from
    target = free[3]["loss"]  # met at the 4th record at the latest
    first = next(r["step"] for r in free if r["loss"] <= target)
    summary, steps = run(tmp_path, repr(target))
    assert summary["reached_step"] == summary["step"] == summary["steps_run"] == first
    assert [r["loss"] for r in steps] == [r["loss"] for r in free if r["step"] <= first]
    assert f"the target loss reached at step {first}" in format_summary(summary)


def test_a_target_never_met_trains_every_step(tmp_path):
    summary, steps = run(tmp_path, "-1e9")
    assert summary["reached_step"] is None and summary["steps_run"] == 60 and len(steps) == 12
    assert "the target loss not reached" in format_summary(summary)


def test_only_the_strategies_whose_ranks_read_one_loss_take_it():
    assert load_config(["--target-loss", "2.5"], world_size=2).train.target_loss == 2.5
    with pytest.raises(ConfigError) as err:
        load_config(["--strategy", "ps", "--target-loss", "2.5"], world_size=2)
    assert err.value.problems == [
        "--target-loss goes with --strategy single or dp or dp-naive or zero, not ps: those "
        "stop where every rank reads one reduced loss"]
    with pytest.raises(ConfigError, match="--target-loss must be a finite number; got inf"):
        load_config(["--target-loss", "inf"], world_size=2)
