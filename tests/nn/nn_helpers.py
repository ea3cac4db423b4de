"""Shared helpers of the nn tests: small float64 models with non-degenerate parameters."""

from __future__ import annotations

import numpy as np
from device_helpers import host, on_device
from hypothesis import settings

from scratchpar.autograd import grad_check
from scratchpar.nn import GPT, LSTMLanguageModel, RNNLanguageModel

FEW = settings(max_examples=6, deadline=None)  # whole-model grad checks: each costs ~0.1–0.5 s
SOME = settings(max_examples=20, deadline=None)

VOCAB = 6
MAX_LEN = 6
MODEL_KINDS = ("gpt", "rnn", "lstm")


def perturb(module, rng: np.random.Generator, scale: float = 0.3):
    """Move every parameter off its initial value (γ off 1, β and biases off 0), in place."""
    for p in module.parameters():
        p.data += on_device(scale * rng.standard_normal(p.shape))
    return module


def make_model(kind: str, seed: int, dropout: float = 0.0, perturbed: bool = True):
    """A tiny float64 language model of the given kind, ids (B, T ≤ MAX_LEN) → (B, T, VOCAB)."""
    gen = np.random.default_rng(seed)
    if kind == "gpt":
        model = GPT(VOCAB, MAX_LEN, d_model=4, n_heads=2, n_layers=1, gen=gen, dropout=dropout,
                    dtype=np.float64)
    elif kind == "rnn":
        model = RNNLanguageModel(VOCAB, 3, 4, gen, dtype=np.float64)
    elif kind == "lstm":
        model = LSTMLanguageModel(VOCAB, 3, 3, gen, dtype=np.float64)
    else:
        raise ValueError(kind)
    return perturb(model, np.random.default_rng(seed + 1)) if perturbed else model


def check_module(module, forward, inputs=()):
    """grad_check ``forward(*inputs)`` with respect to the inputs and every parameter."""
    inputs = list(inputs)
    params = module.parameters()
    assert params, "a module without parameters checks nothing"
    grad_check(lambda *args: forward(*args[:len(inputs)]), inputs + params)
    for p in params:
        assert p.grad is not None and p.grad.shape == p.shape


def param_grads(module) -> dict:
    """Name → a host copy of the gradient (zeros where none was given)."""
    return {name: np.zeros(p.shape) if p.grad is None else np.array(host(p.grad))
            for name, p in module.named_parameters()}
