"""A run stopped, saved and resumed ends bitwise equal to one that never stopped."""

import dataclasses
import json

import numpy as np

from scratchpar.train import build_trainer
from scratchpar.train.precision import AtPrecision
from scratchpar.train.stored import open_checkpoint


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


def test_a_16_bit_run_resumes_bitwise_its_masters_saved_as_the_weights(tmp_path, tiny_config):
    """fp16 with its loss scale: the checkpoint holds the fp32 masters as the model's weights
    and the scale in its meta, and the resumed run ends on the same bits. (The first four
    steps overflow here, as the scale falls from 2¹⁶ to 2¹²: step 6 has masters.)"""
    cfg = tiny_config(precision="fp16")
    straight = build_trainer(cfg)
    straight.run()
    first = build_trainer(replace_train(cfg, stop_after=6, save=str(tmp_path / "ck")))
    first.run()
    with open_checkpoint(str(tmp_path / "ck")) as stored:
        names = [name for name, _ in first.task.model.named_parameters()]
        saved = AtPrecision(stored, names, sixteen=False).state(), stored.meta
    weights = saved[0]["model"]
    assert all(w.dtype == np.float32 for w in weights.values())
    assert not any(k.startswith("master") for k in saved[0]["optim"])
    assert saved[1]["loss_scale"] == first.task.scaler.state_dict()
    np.testing.assert_array_equal(weights["tok.weight"],
                                  first.strategy.optimizer.state[0]["master"])
    second = build_trainer(replace_train(cfg, resume=str(tmp_path / "ck")))
    second.run()
    a, b = final_state(straight), final_state(second)
    assert a.keys() == b.keys() and any(k.startswith("optim/master") for k in a)
    for k in a:
        assert a[k].tobytes() == b[k].tobytes(), k
    assert straight.task.scaler.state_dict() == second.task.scaler.state_dict()


def test_a_checkpoint_resumes_under_another_precision_exactly(tmp_path, tiny_config):
    """fp16's checkpoint resumed in fp32 starts from its masters, bit for bit; fp32's resumed
    in fp16 takes its weights as the masters."""
    half = build_trainer(replace_train(tiny_config(precision="fp16"), stop_after=6,
                                       save=str(tmp_path / "half")))
    half.run()
    whole = build_trainer(replace_train(tiny_config(), resume=str(tmp_path / "half")))
    for i, p in enumerate(whole.task.model.parameters()):
        np.testing.assert_array_equal(p.data, half.strategy.optimizer.state[i]["master"])
    whole = build_trainer(replace_train(tiny_config(), stop_after=4, save=str(tmp_path / "w")))
    whole.run()
    half = build_trainer(replace_train(tiny_config(precision="fp16"), resume=str(tmp_path / "w")))
    for i, p in enumerate(whole.task.model.parameters()):
        np.testing.assert_array_equal(half.strategy.optimizer.state[i]["master"], p.data)
        np.testing.assert_array_equal(half.task.model.parameters()[i].data,
                                      p.data.astype(np.float16))
