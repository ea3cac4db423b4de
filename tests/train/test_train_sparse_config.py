"""The sparse sources' config: each brings its own model unless --model names one, a wrong pair is
refused, their sizes are checked, the layer-splitting strategies refuse them, and every reason is
listed at once."""

import pytest

from scratchpar.train import ConfigError, format_summary, load_config, make_config

PAIRING = ("model {model} cannot learn --source {source}: use mlp with classification, gpt, "
           "lstm or rnn with synthetic or text, logreg with sparse-logreg and factors with "
           "matrix-factorization (the source's own model is the default)")


def problems(argv, world_size=1):
    with pytest.raises(ConfigError) as err:
        load_config(argv, world_size=world_size)
    return err.value.problems


@pytest.mark.parametrize("source, model", [("sparse-logreg", "logreg"),
                                           ("matrix-factorization", "factors")])
def test_a_sparse_source_brings_its_own_model(tmp_path, source, model):
    assert load_config(["--source", source]).model.kind == model
    assert load_config(["--source", source, "--model", model]).model.kind == model
    assert make_config({"data": {"source": source}}).model.kind == model
    toml = tmp_path / "run.toml"
    toml.write_text(f'[data]\nsource = "{source}"\n')
    assert load_config(["--config", str(toml)]).model.kind == model
    assert load_config([]).model.kind == "gpt"  # the other sources keep the default


def test_a_model_paired_with_the_wrong_source_is_refused():
    assert problems(["--source", "sparse-logreg", "--model", "mlp"]) == [
        PAIRING.format(model="mlp", source="sparse-logreg")]
    assert problems(["--source", "matrix-factorization", "--model", "logreg"]) == [
        PAIRING.format(model="logreg", source="matrix-factorization")]
    assert problems(["--model", "factors"]) == [PAIRING.format(model="factors",
                                                               source="synthetic")]
    assert problems(["--model", "logreg", "--source", "classification"]) == [
        PAIRING.format(model="logreg", source="classification")]


def test_the_sizes_are_checked():
    assert problems(["--source", "sparse-logreg", "--n-features", "10", "--nnz", "6"]) == [
        "--nnz (6) must be at most half of --n-features (10): a sparse sample holds a "
        "few of the features"]
    assert load_config(["--source", "sparse-logreg", "--n-features", "10", "--nnz", "5"]) \
        .data.nnz == 5
    assert load_config(["--nnz", "1000"]).data.nnz == 1000  # another source ignores it
    assert problems(["--source", "matrix-factorization", "--n-users", "0", "--rank", "0",
                     "--noise", "-0.5"]) == [
        "--n-users must be at least 1; got 0", "--rank must be at least 1; got 0",
        "--noise must be non-negative; got -0.5"]
    assert load_config(["--source", "matrix-factorization", "--noise", "0"]).data.noise == 0.0
    assert problems(["--noise", "nan"]) == ["--noise must be a finite number; got nan"]


@pytest.mark.parametrize("strategy", ["pipeline", "hybrid"])
@pytest.mark.parametrize("source, model", [("sparse-logreg", "logreg"),
                                           ("matrix-factorization", "factors")])
def test_the_layer_splitting_strategies_refuse_the_sparse_models(strategy, source, model):
    assert problems(["--source", source, "--strategy", strategy, "--pp", "2"], 2) == [
        f"--strategy {strategy} splits a model's layers into stages; model {model} has none "
        "(use single, dp, dp-naive, local-sgd, zero, ps, hogwild or easgd)"]


@pytest.mark.parametrize("strategy, world", [("single", 1), ("dp", 2), ("dp-naive", 2),
                                             ("local-sgd", 2), ("ps", 3)])
def test_the_model_agnostic_strategies_accept_them(strategy, world):
    for source in ("sparse-logreg", "matrix-factorization"):
        assert load_config(["--source", source, "--strategy", strategy], world).train.strategy \
            == strategy


def test_every_violation_is_listed_at_once():
    assert problems(["--source", "sparse-logreg", "--model", "gpt", "--n-features", "4",
                     "--nnz", "3", "--strategy", "pipeline", "--pp", "2", "--lr", "-1"], 2) == [
        "--nnz (3) must be at most half of --n-features (4): a sparse sample holds a few "
        "of the features",
        PAIRING.format(model="gpt", source="sparse-logreg"),
        "--lr must be positive; got -1.0",
    ]  # model gpt has layers to split: the pipeline is not refused for the sparse model


def test_the_summary_names_the_loss_it_measures():
    s = {"step": 9, "steps_run": 9, "eval_loss": 0.0061, "floor": 0.005, "gap": 0.0011,
         "unit": "sample", "measure": "½·squared error", "units_per_s": 100.0,
         "units_per_s_per_rank": 100.0, "world": 1, "elapsed_s": 1.0}
    line = format_summary(s)
    assert ("held-out loss 0.0061 (½·squared error per sample) · floor 0.0050 · gap +0.0011 "
            "· RMSE 0.1105 against the noise's σ 0.1000") in line, line
    assert "% above" not in line  # 22% above a noise floor of σ²/2 reads as a failure
    assert "nats" not in line and "entropy" not in line
    nats = format_summary({**s, "measure": "nats"})
    assert "0.0061 nats/sample · entropy floor 0.0050" in nats
