"""The memory estimate in 16 bits and under recomputation: mixed precision's 2 + 2 + 12 bytes
a parameter, the activations recomputation leaves, and a 16-bit GPT's estimate as close to its
measured peak as fp32's."""

import pytest
from test_train_memory import config, measured_peak

from scratchpar.parallel.zero.formula import formula
from scratchpar.train import make_config
from scratchpar.train.memory import (
    RUNTIME_BYTES,
    estimate,
    measurable,
    network,
)
from scratchpar.train.strategies import REGISTRY
from scratchpar.train.strategies.family import Layout


@pytest.mark.parametrize("strategy, stage", [("single", 1), ("dp", 1), ("zero", 1), ("zero", 3)])
def test_in_mixed_precision_the_states_are_the_papers_2_2_12(strategy, stage):
    """fp16 weights and gradients, fp32 masters and Adam's moments: the description the
    estimate reads holds 2 + 2 + 12 bytes a parameter (Rajbhandari et al. 2020, §3), divided
    as each strategy divides them."""
    cfg = make_config({"train": {"strategy": strategy, "precision": "fp16",
                                 "zero_stage": stage}})
    whole = make_config({"train": {"strategy": strategy, "zero_stage": stage}})
    shape = network(cfg, 4, cfg.data.vocab_size, Layout(1), 1).shape
    assert (shape.itemsize, shape.k) == (2, 12)
    assert network(whole, 4, cfg.data.vocab_size, Layout(1), 1).shape.k == 8
    held = REGISTRY[strategy].describe(cfg, shape, 4).holds
    if strategy != "zero":
        assert (held["parameters"], held["gradients"], held["optimizer"]) == (
            2 * shape.psi, 2 * shape.psi, 12 * shape.psi)
    else:
        want = formula(stage, shape.psi, 4, 2, 12)
        assert held["optimizer"] >= want["optimizer"] and held["parameters"] >= \
            want["parameters"] and held["gradients"] >= want["gradients"]
        assert held["optimizer"] <= 1.01 * want["optimizer"]


@pytest.mark.parametrize("seq_len", [64, 256])
def test_recomputation_lowers_what_the_estimate_holds_as_a_step_does(seq_len):
    """The default GPT with dropout: full recomputation keeps each block's input alone, so its
    activations fall below selective's, which keep all but the attention cores' (B, H, T, T)
    arrays; the measured peaks fall alike, each below its estimate."""
    def cfg(mode: str):
        return make_config({"model": {"dropout": 0.1}, "data": {"seq_len": seq_len},
                            "train": {"recompute": mode, "batch_size": 8}})

    estimated = {m: estimate(cfg(m), 1)["activations"] for m in ("none", "selective", "full")}
    assert estimated["full"] < estimated["selective"] < estimated["none"]
    peaks = {m: measured_peak(cfg(m)) for m in ("none", "full")}
    assert peaks["full"] < peaks["none"]
    for mode, peak in peaks.items():
        assert peak <= measurable(cfg(mode), estimate(cfg(mode), 1)) + RUNTIME_BYTES


@pytest.mark.parametrize("recompute", ["none", "selective"])
def test_in_16_bits_the_gpt_estimate_is_as_close_as_in_fp32(recompute):
    """The arrays a 16-bit GPT's backward reads are 16-bit, and the estimate counts them so:
    its margin over the measured peak stays within a fifth of fp32's (counted at 4 bytes,
    the 16-bit estimate stood twice the peak)."""
    def ratio(precision: str) -> float:
        cfg = config("gpt", {"dtype": "float32", "precision": precision, "optimizer": "adam",
                             "weight_decay": 0.0, "momentum": 0.0, "batch_size": 16,
                             "eval_batches": 1, "seq_len": 48, "vocab_size": 24, "order": 1,
                             "heads": 4, "head_dim": 16, "n_layers": 2, "dropout": 0.1,
                             "recompute": recompute})
        peak = measured_peak(cfg)
        estimated = measurable(cfg, estimate(cfg, 1))
        assert peak <= estimated + RUNTIME_BYTES
        return estimated / peak

    assert ratio("fp16") <= 1.2 * ratio("fp32")
