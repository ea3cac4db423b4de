"""Initialization: Xavier and Kaiming bounds and variances, zero biases, orthogonal recurrences."""

import math

import numpy as np
import pytest
from device_helpers import host

from scratchpar.nn import (
    MLP,
    Embedding,
    LayerNorm,
    Linear,
    LSTMLanguageModel,
    RNNLanguageModel,
    init,
)

# With ≥ 2·10⁵ draws the sample variance of a uniform (normal) law has a relative standard
# deviation below 0.2 % (0.32 %), so 2 % is a > 6 σ band: a wrong formula (a 25 % or larger change
# between the Xavier and Kaiming variances here) cannot pass, and a right one cannot fail.
REL = 0.02


def check_uniform(w, bound):
    assert np.abs(w).max() <= bound
    assert np.abs(w).max() > 0.999 * bound  # the whole interval is used
    assert abs(w.mean()) < 0.01 * bound
    np.testing.assert_allclose(w.var(), bound**2 / 3, rtol=REL)


@pytest.mark.parametrize("fan_in, fan_out", [(1024, 256), (256, 1024)])
def test_linear_xavier_uniform(fan_in, fan_out):
    layer = Linear(fan_in, fan_out, np.random.default_rng(0))
    w = host(layer.weight.data).astype(np.float64)
    assert layer.weight.shape == (fan_in, fan_out) and layer.weight.dtype == np.float32
    check_uniform(w, math.sqrt(6.0 / (fan_in + fan_out)))
    np.testing.assert_allclose(w.var(), 2.0 / (fan_in + fan_out), rtol=REL)  # Glorot eq. 12
    np.testing.assert_array_equal(host(layer.bias.data), np.zeros(fan_out))


def test_linear_kaiming_uniform_before_relu():
    layer = Linear(1024, 256, np.random.default_rng(1), relu_follows=True)
    w = host(layer.weight.data).astype(np.float64)
    check_uniform(w, math.sqrt(6.0 / 1024))
    np.testing.assert_allclose(w.var(), 2.0 / 1024, rtol=REL)  # He et al. 2015: Var = 2 / fan_in


def test_mlp_uses_kaiming_before_relu_and_xavier_at_the_head():
    model = MLP([1024, 512, 512], np.random.default_rng(2))
    first, last = host(model[0].weight.data), host(model[2].weight.data)
    np.testing.assert_allclose(first.var(), 2.0 / 1024, rtol=REL)
    np.testing.assert_allclose(last.var(), 2.0 / (512 + 512), rtol=REL)


def test_embedding_xavier_normal():
    v, d = 2000, 256
    w = host(Embedding(v, d, np.random.default_rng(3)).weight.data).astype(np.float64)
    std = math.sqrt(2.0 / (v + d))
    assert abs(w.mean()) < 0.01 * std
    np.testing.assert_allclose(w.std(), std, rtol=REL)
    kurtosis = ((w - w.mean()) ** 4).mean() / w.var() ** 2
    assert abs(kurtosis - 3.0) < 0.1  # normal, not uniform (whose kurtosis is 1.8)


def test_layer_norm_starts_as_identity_affine():
    layer = LayerNorm(5, dtype=np.float64)
    np.testing.assert_array_equal(host(layer.weight.data), np.ones(5))
    np.testing.assert_array_equal(host(layer.bias.data), np.zeros(5))


@pytest.mark.parametrize("cls, gates", [(RNNLanguageModel, 1), (LSTMLanguageModel, 4)])
def test_recurrent_weights_are_orthogonal_per_gate(cls, gates):
    h = 16
    model = cls(11, 8, h, np.random.default_rng(4), dtype=np.float64)
    w = host(model.layers[0].recurrent.data)
    assert w.shape == (h, gates * h)
    for g in range(gates):
        block = w[:, g * h:(g + 1) * h]
        np.testing.assert_allclose(block.T @ block, np.eye(h), atol=1e-12)
    if gates > 1:
        assert not np.allclose(w[:, :h], w[:, h:2 * h])  # independent blocks


def test_init_functions_are_reproducible_and_honor_dtype():
    a = init.xavier_uniform(np.random.default_rng(7), 3, 5, (3, 5), np.float64)
    b = init.xavier_uniform(np.random.default_rng(7), 3, 5, (3, 5), np.float64)
    np.testing.assert_array_equal(host(a), host(b))
    assert init.kaiming_uniform(np.random.default_rng(7), 3, (2, 3), np.float32).dtype == \
        np.float32
    assert init.xavier_normal(np.random.default_rng(7), 3, 5, (4,), np.float64).shape == (4,)
