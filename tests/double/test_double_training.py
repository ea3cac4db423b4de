"""Training on the device double: where the host waits for the device, step after step."""

from collections import Counter

import pytest

from scratchpar import double
from scratchpar.train import make_config
from scratchpar.train.build import build_trainer

STEPS = 6
MODELS = [("gpt", "synthetic"), ("lstm", "synthetic"), ("mlp", "classification")]


@pytest.mark.parametrize("model, source", MODELS)
def test_a_training_step_waits_for_the_device_once(model, source, tmp_path):
    cfg = make_config({"model": {"kind": model}, "data": {"source": source},
                       "train": {"strategy": "single", "device": "double", "steps": STEPS,
                                 "log_every": STEPS, "eval_batches": 1, "progress": False,
                                 "metrics": str(tmp_path / "m.jsonl")},
                       "optim": {"grad_clip": 1.0}})
    trainer = build_trainer(cfg)
    with double.watch() as seen:
        trainer.run()
    sites = Counter(seen.syncs_from())
    every_step = sorted(site for site, n in sites.items() if n >= STEPS)
    assert [site.split(":")[0] for site in every_step] == [f"tolist at {GUARD}"], sites
    assert sum(sites.values()) <= STEPS + 3, sites  # + the held-out loss and the run's end


GUARD = "scratchpar/optim/guard.py"


@pytest.mark.parametrize("model, source", MODELS)
def test_after_its_first_step_forward_and_backward_are_capturable(model, source, tmp_path):
    """A CUDA graph replays kernels with the arguments they were captured with: the host may
    not wait for the device, copy either way, or make a host number a device array inside it.
    A single-device step's forward and backward do none of these once its first step has
    built what it caches (the causal mask), so they can be captured (docs/devices.md)."""
    cfg = make_config({"model": {"kind": model}, "data": {"source": source},
                       "train": {"strategy": "single", "device": "double", "steps": 2,
                                 "progress": False, "metrics": str(tmp_path / "m.jsonl")}})
    trainer = build_trainer(cfg)
    strategy, rows = trainer.strategy, cfg.train.batch_size
    for step in range(2):
        batch, _ = trainer.task.batch(step, rows, strategy.rows(rows))
        strategy.optimizer.zero_grad()
        with double.watch() as seen:
            strategy.backward_mean(batch)
    assert (seen.syncs_from(), seen.copies, seen.scalars) == ([], 0, [])
    assert all(p.grad is not None for p in strategy.params)
