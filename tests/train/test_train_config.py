"""Config: defaults < TOML < flags, and one ConfigError listing every violation."""

import pytest

from scratchpar.train import ConfigError, load_config, make_config
from scratchpar.train.strategies import REGISTRY


def test_defaults_are_valid():
    cfg = load_config([])
    assert cfg.train.strategy == "dp"
    assert cfg.model.d_model % cfg.model.n_heads == 0


def test_flags_override_toml_which_overrides_defaults(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text("[model]\nd_model = 32\nn_heads = 8\n[optim]\nlr = 1\n[train]\nsteps = 7\n")
    cfg = load_config(["--config", str(toml), "--steps", "9", "--warmup", "2"])
    assert (cfg.model.d_model, cfg.model.n_heads, cfg.train.steps) == (32, 8, 9)
    assert cfg.optim.lr == 1.0 and isinstance(cfg.optim.lr, float)
    assert cfg.model.n_layers == 2  # untouched default


def test_config_is_frozen():
    cfg = load_config([])
    with pytest.raises(AttributeError):
        cfg.train.steps = 3


def test_every_violation_is_listed_at_once():
    with pytest.raises(ConfigError) as err:
        load_config(["--n-heads", "3", "--lr", "-1", "--steps", "5", "--warmup", "9",
                     "--dropout", "1.5", "--model", "mlp"])
    problems = err.value.problems
    assert len(problems) == 5, problems
    text = str(err.value)
    for fragment in ("--n-heads (3) must divide", "--lr must be positive", "warmup (9)",
                     "dropout must be in [0, 1)", "model mlp cannot learn"):
        assert fragment in text


def test_toml_unknown_keys_and_bad_types_are_reported(tmp_path):
    toml = tmp_path / "bad.toml"
    toml.write_text("[model]\nwidth = 3\n[nonsense]\nx = 1\n")
    with pytest.raises(ConfigError) as err:
        load_config(["--config", str(toml)])
    assert len(err.value.problems) == 2
    with pytest.raises(ConfigError, match="expected int"):
        make_config({"train": {"steps": "many"}})


def test_data_path_implies_text_and_must_exist(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(["--data", str(tmp_path / "missing.txt")])
    text = tmp_path / "corpus.txt"
    text.write_text("hello world " * 50)
    assert load_config(["--data", str(text)]).data.source == "text"


def test_unreadable_toml_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="--config"):
        load_config(["--config", str(tmp_path / "absent.toml")])


def test_a_precision_is_refused_where_it_cannot_run_with_every_reason():
    assert load_config(["--precision", "fp16", "--strategy", "single"]).train.precision == "fp16"
    with pytest.raises(ConfigError) as err:
        load_config(["--precision", "bf16", "--dtype", "float64", "--device", "cuda"])
    text = str(err.value)
    for fragment in ("--precision bf16 keeps fp32 masters: it goes with --dtype float32",
                     "bf16 needs bfloat16 arrays, which CuPy lacks (--device cuda)"):
        assert fragment in text
    pipedream = ["--strategy", "pipeline", "--pp", "2", "--pp-schedule", "pipedream"]
    with pytest.raises(ConfigError, match="--precision fp16 goes with the flushing schedules, "
                                          "not --pp-schedule pipedream"):
        load_config(["--precision", "fp16", *pipedream], 2)
    assert load_config(["--precision", "bf16", *pipedream], 2).train.precision == "bf16"
    for strategy in REGISTRY:  # every strategy trains in 16 bits
        cfg = load_config(["--precision", "fp16", "--strategy", strategy],
                          1 if strategy == "single" else 4)
        assert (cfg.train.strategy, cfg.train.precision) == (strategy, "fp16")
    with pytest.raises(ConfigError, match="invalid choice: 'fp8'"):
        load_config(["--precision", "fp8"])


def test_recomputation_is_refused_where_it_cannot_run_with_every_reason():
    assert load_config(["--recompute", "full", "--strategy", "dp"]).train.recompute == "full"
    with pytest.raises(ConfigError) as err:
        load_config(["--recompute", "full", "--strategy", "ps", "--model", "logreg",
                     "--source", "sparse-logreg"])
    text = str(err.value)
    with pytest.raises(ConfigError, match="--recompute selective recomputes attention; model "
                                          "lstm has none"):
        load_config(["--recompute", "selective", "--model", "lstm"])
    assert load_config(["--recompute", "full", "--strategy", "pipeline", "--pp", "2",
                        "--pp-schedule", "pipedream"], 2).train.recompute == "full"
    assert "--recompute full recomputes the layers a model lists; model logreg" in text
    for strategy in REGISTRY:  # every strategy recomputes
        cfg = load_config(["--recompute", "selective", "--strategy", strategy],
                          1 if strategy == "single" else 4)
        assert (cfg.train.strategy, cfg.train.recompute) == (strategy, "selective")
