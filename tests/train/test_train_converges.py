"""A short run on the synthetic language gets within a stated margin of its entropy floor."""

import pytest

from scratchpar.train import build_trainer, make_config

MARGIN = 0.1  # nats per token above the exact floor; the start is ~0.9 nats above it

@pytest.mark.parametrize("kind", ["gpt", "lstm"])
def test_short_run_reaches_bayes_risk(tmp_path, kind):
    cfg = make_config({
        "model": {"kind": kind, "d_model": 32, "n_heads": 2, "n_layers": 1, "d_hidden": 32},
        "data": {"vocab_size": 12, "order": 1, "seq_len": 24, "mean_length": 8.0,
                 "concentration": 0.3},
        "optim": {"lr": 1e-2, "warmup": 20},
        "train": {"steps": 300, "batch_size": 16, "eval_batches": 16, "progress": False,
                  "metrics": str(tmp_path / "m.jsonl")},
    })
    trainer = build_trainer(cfg)
    before = trainer.task.evaluate(16, 16)
    summary = trainer.run()
    floor = summary["floor"]
    assert before > floor + 0.5
    assert summary["eval_loss"] > floor - 0.02  # no model beats the true source (up to noise)
    assert summary["gap"] < MARGIN, summary
