"""A resumed run takes its model, data and optimizer from the checkpoint; flags change only what
may change, and a flag that contradicts the checkpoint is refused naming both values."""

import json

import pytest

from scratchpar.train import build_trainer, load_config
from scratchpar.train.option import ConfigError

TRAINED = ["--model", "lstm", "--d-model", "12", "--d-hidden", "10", "--n-layers", "1",
           "--seq-len", "9", "--vocab-size", "11", "--order", "1", "--optimizer", "sgd",
           "--lr", "0.5", "--momentum", "0.5", "--seed", "3", "--steps", "8", "--warmup", "2",
           "--batch-size", "3", "--eval-batches", "1", "--no-progress"]


@pytest.fixture
def checkpoint(tmp_path):
    """A run of TRAINED stopped at step 4, saved: the checkpoint's directory."""
    ck = tmp_path / "ck"
    build_trainer(load_config([*TRAINED, "--strategy", "dp", "--stop-after", "4",
                               "--trace", str(tmp_path / "t.json"), "--save", str(ck),
                               "--metrics", str(tmp_path / "m.jsonl")])).run()
    return ck


def test_the_checkpoint_alone_gives_back_the_run_it_was_trained_with(checkpoint, tmp_path):
    cfg = load_config(["--resume", str(checkpoint)])
    trained = load_config([*TRAINED, "--strategy", "dp"])
    assert cfg.model == trained.model and cfg.data == trained.data
    assert cfg.optim == trained.optim
    assert (cfg.train.steps, cfg.train.seed, cfg.train.batch_size, cfg.train.strategy) == \
        (8, 3, 3, "dp")
    assert (cfg.train.stop_after, cfg.train.trace, cfg.train.save) == (None, None, None)
    assert cfg.train.metrics.endswith("m.jsonl")  # appended to, as a resume does
    trainer = build_trainer(cfg)
    trainer.run()
    assert trainer.step == 8


def test_what_may_change_on_resume_changes(checkpoint):
    cfg = load_config(["--resume", str(checkpoint), "--steps", "20", "--lr", "0.1",
                       "--strategy", "single", "--dropout", "0.2", "--log-every", "2",
                       "--d-model", "12", "--model", "lstm"])  # the same values: accepted
    assert (cfg.train.steps, cfg.optim.lr, cfg.train.strategy, cfg.model.dropout,
            cfg.train.log_every, cfg.model.d_model) == (20, 0.1, "single", 0.2, 2, 12)


def test_a_flag_that_contradicts_the_checkpoint_names_both_values(checkpoint):
    with pytest.raises(ConfigError) as err:
        load_config(["--resume", str(checkpoint), "--d-hidden", "16", "--optimizer", "adamw",
                     "--vocab-size", "11", "--tie-embeddings"])
    lines = err.value.problems
    assert len(lines) == 3, lines  # the vocabulary is the checkpoint's: no contradiction
    for said, was in (("--d-hidden 16", "--d-hidden 10"), ("--optimizer adamw", "--optimizer sgd"),
                      ("--tie-embeddings", "--no-tie-embeddings")):
        assert any(line.startswith(f"{said} contradicts the checkpoint {checkpoint}, trained "
                                   f"with {was}:") for line in lines), (said, lines)


def test_a_toml_key_that_contradicts_the_checkpoint_says_where_it_came_from(checkpoint,
                                                                           tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('[model]\nkind = "gpt"\n[train]\nsteps = 12\n')
    with pytest.raises(ConfigError) as err:
        load_config(["--config", str(toml), "--resume", str(checkpoint)])
    assert err.value.problems == [
        f"--config {toml}: --model gpt contradicts the checkpoint {checkpoint}, trained with "
        "--model lstm: a resumed run keeps the model, data and optimizer it was trained with "
        "(start a new run to change them)"]


def test_a_checkpoint_whose_config_is_not_a_table_is_refused(checkpoint):
    meta = json.loads((checkpoint / "meta.json").read_text())
    meta["config"] = {"model": 3}
    (checkpoint / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="its meta.json's config is not a table of sections"):
        load_config(["--resume", str(checkpoint)])


def test_a_checkpoint_of_another_version_keeps_what_this_one_knows(checkpoint):
    meta = json.loads((checkpoint / "meta.json").read_text())
    meta["config"]["model"]["width_multiplier"] = 2
    meta["config"]["extras"] = {"x": 1}
    (checkpoint / "meta.json").write_text(json.dumps(meta))
    assert load_config(["--resume", str(checkpoint)]).model.d_hidden == 10


def test_another_strategy_takes_none_of_the_old_ones_layout(checkpoint):
    meta = json.loads((checkpoint / "meta.json").read_text())
    meta["config"]["train"].update(strategy="ps", servers=2, ps_mode="ssp")
    (checkpoint / "meta.json").write_text(json.dumps(meta))
    kept = load_config(["--resume", str(checkpoint)], world_size=3)
    assert (kept.train.strategy, kept.train.servers, kept.train.ps_mode) == ("ps", 2, "ssp")
    moved = load_config(["--resume", str(checkpoint), "--strategy", "dp"], world_size=2)
    assert (moved.train.strategy, moved.train.servers, moved.train.ps_mode) == ("dp", 1, "sync")
    assert moved.train.batch_size == 3  # the run's own values still come along


def test_a_layout_comes_whole_or_not_at_all(checkpoint):
    meta = json.loads((checkpoint / "meta.json").read_text())
    meta["config"]["train"].update(strategy="hybrid", dp=1, pp=2, tp=2, pp_schedule="gpipe",
                                   batch_size=8)
    meta["config"]["model"].update(kind="gpt", n_heads=4, d_model=16)
    meta["config"]["data"].update(vocab_size=12)
    (checkpoint / "meta.json").write_text(json.dumps(meta))
    kept = load_config(["--resume", str(checkpoint)], world_size=4)
    assert (kept.train.dp, kept.train.pp, kept.train.tp, kept.train.pp_schedule) == \
        (1, 2, 2, "gpipe")
    moved = load_config(["--resume", str(checkpoint), "--tp", "4"], world_size=4)
    assert (moved.train.dp, moved.train.pp, moved.train.tp, moved.train.pp_schedule) == \
        (None, 1, 4, "1f1b")
