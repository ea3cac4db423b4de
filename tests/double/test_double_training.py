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
