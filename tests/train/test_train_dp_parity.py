"""Every strategy, run in-process on a world of one rank, trains exactly as one device does; a
checkpoint written by one strategy resumes under another."""

import dataclasses
import json

import numpy as np
import pytest

from scratchpar.train import build_trainer

STRATEGIES = ("dp", "dp-naive", "local-sgd")


def exact(tiny_config, **train):
    """float64 and no dropout: every strategy must then reproduce one device's arithmetic."""
    cfg = tiny_config(dtype="float64", log_every=1, steps=6, **train)
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, dropout=0.0))


def losses(cfg) -> list[float]:
    return [r["loss"] for r in map(json.loads, open(cfg.train.metrics)) if r["event"] == "step"]


def params(trainer) -> dict:
    return {k: np.array(v) for k, v in trainer.strategy.model.state_dict().items()}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_one_rank_world_trains_as_one_device(tiny_config, tmp_path, strategy):
    single_cfg = exact(tiny_config, strategy="single", metrics=str(tmp_path / "single.jsonl"))
    single = build_trainer(single_cfg)
    single.run()
    cfg = exact(tiny_config, strategy=strategy, local_sgd_every=2)
    trainer = build_trainer(cfg)
    assert trainer.strategy.comm.size == 1
    summary = trainer.run()
    assert summary["world"] == 1 and summary["units_per_s_per_rank"] == summary["units_per_s"]
    want, got = losses(single_cfg), losses(cfg)
    assert len(got) == 6 and len(set(got)) == 6  # the loss moves: a real comparison
    np.testing.assert_allclose(got, want, rtol=1e-9)
    for name, value in params(single).items():
        np.testing.assert_allclose(params(trainer)[name], value, rtol=1e-9, atol=1e-10)


def test_a_dp_checkpoint_resumes_on_one_device(tiny_config, tmp_path):
    straight = build_trainer(exact(tiny_config, strategy="single"))
    straight.run()
    first = build_trainer(exact(tiny_config, stop_after=3, save=str(tmp_path / "ck")))
    first.run()
    assert first.step == 3
    second = build_trainer(exact(tiny_config, strategy="single", resume=str(tmp_path / "ck")))
    second.run()
    assert second.step == 6
    for name, value in params(straight).items():
        np.testing.assert_allclose(params(second)[name], value, rtol=1e-9, atol=1e-10)


def test_a_local_sgd_checkpoint_keeps_its_step_count(tiny_config, tmp_path):
    """On one rank local SGD is plain SGD; resuming restores its step counter with the model."""
    straight = build_trainer(exact(tiny_config, strategy="local-sgd", local_sgd_every=2))
    straight.run()
    first = build_trainer(exact(tiny_config, strategy="local-sgd", local_sgd_every=2,
                                stop_after=3, save=str(tmp_path / "ck")))
    first.run()
    second = build_trainer(exact(tiny_config, strategy="local-sgd", local_sgd_every=2,
                                 resume=str(tmp_path / "ck")))
    second.run()
    assert second.strategy.steps == 6  # 3 restored + 3 more
    for name, value in params(straight).items():
        np.testing.assert_allclose(params(second)[name], value, rtol=1e-9, atol=1e-10)
