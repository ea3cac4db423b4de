"""A sparse GPT on the command line: every reason its flags cannot run, listed at once; a run
that records its routing beside its loss and scores the tokens alone; and the memory estimate
bounding what its steps allocate, as it bounds the dense GPT's."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_train_memory import check_bounds, config

from scratchpar.nn import lm_loss
from scratchpar.train import ConfigError, build_trainer, load_config

TINY = ["--model", "gpt", "--d-model", "8", "--n-heads", "2", "--n-layers", "2", "--seq-len",
        "8", "--vocab-size", "10", "--steps", "3", "--batch-size", "4", "--eval-batches", "1",
        "--log-every", "1", "--no-progress", "--dtype", "float64", "--strategy", "single"]


def problems(argv, world_size=1):
    with pytest.raises(ConfigError) as err:
        load_config(argv, world_size=world_size)
    return err.value.problems


def test_every_reason_the_experts_cannot_run_is_listed_at_once():
    assert problems(["--model", "lstm", "--experts", "4", "--top-k", "5", "--moe-every", "3",
                     "--capacity-factor", "-1", "--z-loss", "-0.5", "--strategy", "dp"], 2) == [
        "--experts routes a GPT's feed-forward tokens; model lstm has none",
        "--top-k must be from 1 to --experts (4); got 5",
        "--moe-every must be from 1 to --n-layers (2), so that a block is sparse; got 3",
        "--capacity-factor must be 0 or more; got -1.0",
        "--z-loss must be 0 or more; got -0.5",
        "--experts trains with --strategy single, hybrid or zero, not dp: those route, cap and "
        "balance over every rank's tokens of a micro-batch, and hybrid splits the experts over "
        "--ep"]
    assert problems(["--experts", "-2"]) == ["--experts must be 0 (dense) or more; got -2"]
    assert problems([*TINY, "--strategy", "hybrid", "--experts", "3", "--ep", "2",
                     "--sequence-parallel"], 2) == [
        "--ep 2 gives each rank an equal share of a sparse layer's experts: --experts 3 does "
        "not divide by 2",
        "--sequence-parallel gives each tp rank its own tokens of a sparse block, which the "
        "routing's tally does not count: drop it with --experts"]
    assert problems([*TINY, "--strategy", "hybrid", "--ep", "4", "--tp", "2"], 4) == [
        "--ep 4 splits a sparse model's experts: give --experts",
        "--ep 4 folds onto the dp × cp ranks, 2 here: it must divide them"]


def test_a_sparse_run_records_its_routing_and_its_loss_is_its_tokens_alone(tmp_path):
    metrics = tmp_path / "m.jsonl"
    trainer = build_trainer(load_config([*TINY, "--experts", "3", "--top-k", "2",
                                         "--capacity-factor", "0.5", "--metrics",
                                         str(metrics)]))
    summary = trainer.run()
    steps = [r for r in map(json.loads, metrics.read_text().splitlines())
             if r["event"] == "step"]
    assert len(steps) == 3
    for r in steps:
        assert r["dropped"] > 0 and r["load"] >= 1 and r["balance_loss"] > 0 < r["z_loss"]
    model, task = trainer.strategy.model, trainer.task
    batch = task.held_out_batch(0, 4)[0]
    tokens = float(lm_loss(model, batch, "sum").data)
    assert float(task.score(model, batch)[0]) == pytest.approx(tokens, rel=1e-12)
    assert float(task.loss(model, batch, "sum").data) == pytest.approx(tokens, rel=1e-12)
    assert model.routing()["balance_loss"] > 0  # carried into backward, not in the value
    assert math.isfinite(summary["eval_loss"])


@settings(max_examples=6, deadline=None)
@given(d=st.fixed_dictionaries({
    "dtype": st.sampled_from(["float32", "float64"]), "precision": st.just("fp32"),
    "optimizer": st.sampled_from(["sgd", "adam"]), "weight_decay": st.just(0.0),
    "momentum": st.just(0.0), "batch_size": st.integers(1, 8), "eval_batches": st.just(1),
    "seq_len": st.integers(2, 24), "vocab_size": st.integers(4, 16), "order": st.just(1),
    "heads": st.integers(1, 2), "head_dim": st.integers(2, 8), "n_layers": st.integers(1, 2),
    "dropout": st.just(0.0), "recompute": st.just("none")}),
    experts=st.integers(2, 4), k=st.integers(1, 2), factor=st.sampled_from([0.0, 1.0]))
def test_the_estimate_bounds_a_sparse_gpt_s_step(d, experts, k, factor):
    cfg = config("gpt", d)
    model = {**vars(cfg.model), "experts": experts, "top_k": k, "capacity_factor": factor}
    check_bounds(type(cfg)(**{**vars(cfg), "model": type(cfg.model)(**model)}))
