"""A run stopped, saved and resumed ends bitwise equal to one that never stopped."""

import dataclasses
import json

import numpy as np

from scratchpar.train import build_trainer


def replace_train(cfg, **changes):
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **changes))


def final_state(trainer):
    state = trainer.strategy.state_dict()
    return {f"{part}/{k}": np.array(v) for part, named in state.items() for k, v in named.items()}


def test_resume_equals_uninterrupted_run(tmp_path, tiny_config):
    cfg = tiny_config()
    straight = build_trainer(cfg)
    straight.run()

    first = build_trainer(replace_train(cfg, stop_after=4, save=str(tmp_path / "ck")))
    first.run()
    assert first.step == 4
    second = build_trainer(replace_train(cfg, resume=str(tmp_path / "ck")))
    second.run()
    assert second.step == cfg.train.steps

    a, b = final_state(straight), final_state(second)
    assert a.keys() == b.keys()
    assert any(k.startswith("optim/exp_avg") for k in a)
    for k in a:
        assert a[k].tobytes() == b[k].tobytes(), k
    assert straight.dropout_gen.state == second.dropout_gen.state


def test_resume_changes_training(tmp_path, tiny_config):
    """The check above can fail: a different seed gives different parameters."""
    cfg = tiny_config()
    a = build_trainer(cfg)
    a.run()
    b = build_trainer(replace_train(cfg, seed=1))
    b.run()
    assert any(not np.array_equal(x, y) for x, y in
               zip(final_state(a).values(), final_state(b).values()))


def test_metrics_file_records_the_run(tmp_path, tiny_config):
    cfg = tiny_config()
    summary = build_trainer(cfg).run()
    records = [json.loads(line) for line in open(cfg.train.metrics)]
    assert records[0]["event"] == "start" and records[0]["floor"] == summary["floor"]
    steps = [r["step"] for r in records if r["event"] == "step"]
    assert steps == [3, 6, 9, 10]
    assert records[-1]["event"] == "final"
    assert np.isfinite(records[-1]["eval_loss"]) and records[-1]["gap"] == summary["gap"]
