"""Every layer and model through grad_check, on its parameters and on its input."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from nn_helpers import FEW, MAX_LEN, MODEL_KINDS, SOME, VOCAB, check_module, make_model, perturb

from scratchpar.autograd import Tensor
from scratchpar.device_rng import DeviceRandom
from scratchpar.nn import (
    GELU,
    MLP,
    Block,
    CausalSelfAttention,
    Dropout,
    Embedding,
    LayerNorm,
    Linear,
    ReLU,
    Sequential,
    Tanh,
    lm_loss,
    set_dropout_generator,
)

seeds = st.integers(0, 2**32 - 1)
lead_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


def x64(rng, shape):
    return Tensor(on_device(rng.standard_normal(shape)), requires_grad=True)


@SOME
@given(lead=lead_shapes, d=st.integers(1, 4), f=st.integers(1, 4), bias=st.booleans(),
       relu_follows=st.booleans(), seed=seeds)
def test_linear(lead, d, f, bias, relu_follows, seed):
    rng = np.random.default_rng(seed)
    layer = perturb(Linear(d, f, rng, bias=bias, dtype=np.float64, relu_follows=relu_follows),
                    rng)
    assert (layer.bias is None) == (not bias)
    x = x64(rng, lead + (d,))
    out = layer(x)
    expected = x.data @ layer.weight.data + (layer.bias.data if bias else 0.0)
    np.testing.assert_allclose(host(out.data), host(expected), rtol=1e-13, atol=1e-15)
    check_module(layer, layer, [x])


@SOME
@given(v=st.integers(1, 5), d=st.integers(1, 4), ids_shape=lead_shapes, seed=seeds)
def test_embedding(v, d, ids_shape, seed):
    rng = np.random.default_rng(seed)
    layer = Embedding(v, d, rng, dtype=np.float64)
    ids = rng.integers(0, v, size=ids_shape)
    device_ids = on_device(ids)
    out = layer(device_ids)
    assert out.shape == ids_shape + (d,)
    np.testing.assert_array_equal(host(out.data), host(layer.weight.data)[ids])
    check_module(layer, lambda: layer(device_ids))
    layer.zero_grad()
    layer(device_ids).backward(on_device(np.ones(ids_shape + (d,))))
    counts = np.bincount(np.reshape(ids, -1), minlength=v)
    np.testing.assert_array_equal(host(layer.weight.grad), np.repeat(counts[:, None], d, 1))


@SOME
@given(lead=lead_shapes, d=st.integers(2, 5), seed=seeds)
def test_layer_norm_with_nontrivial_affine(lead, d, seed):
    rng = np.random.default_rng(seed)
    layer = LayerNorm(d, dtype=np.float64)
    np.testing.assert_array_equal(host(layer.weight.data), np.ones(d))
    np.testing.assert_array_equal(host(layer.bias.data), np.zeros(d))
    perturb(layer, rng)
    x = x64(rng, lead + (d,))
    out = layer(x)
    xhat = (x.data - x.data.mean(-1, keepdims=True)) / np.sqrt(x.data.var(-1, keepdims=True)
                                                               + 1e-5)
    np.testing.assert_allclose(host(out.data), host(xhat * layer.weight.data + layer.bias.data),
                               rtol=1e-12, atol=1e-14)
    check_module(layer, layer, [x])


@SOME
@given(sizes=st.lists(st.integers(1, 4), min_size=2, max_size=4), batch=st.integers(1, 3),
       seed=seeds)
def test_mlp(sizes, batch, seed):
    rng = np.random.default_rng(seed)
    model = perturb(MLP(sizes, rng, dtype=np.float64), rng)
    kinds = [type(m) for m in model]
    assert kinds == [Linear, ReLU] * (len(sizes) - 2) + [Linear]
    x = x64(rng, (batch, sizes[0]))
    h = x.data
    for layer in model:
        h = np.maximum(h, 0.0) if isinstance(layer, ReLU) else h @ layer.weight.data + \
            layer.bias.data
    np.testing.assert_allclose(host(model(x).data), host(h), rtol=1e-12, atol=1e-14)
    check_module(model, model, [x])


@SOME
@given(seed=seeds, p=st.floats(0.1, 0.8))
def test_sequential_of_activations_and_dropout(seed, p):
    rng = np.random.default_rng(seed)
    gen_seed = int(rng.integers(2**31))
    drop = Dropout(p)
    model = Sequential(Linear(3, 4, rng, dtype=np.float64), Tanh(),
                       Linear(4, 4, rng, dtype=np.float64), GELU(), drop)
    perturb(model, rng)
    x = x64(rng, (2, 3))

    def forward(t):
        set_dropout_generator(model, DeviceRandom(gen_seed))  # the same mask each call
        return model(t)

    check_module(model, forward, [x])
    model.eval()
    h = np.tanh(x.data @ model[0].weight.data + model[0].bias.data)
    h = h @ model[2].weight.data + model[2].bias.data
    np.testing.assert_allclose(host(model(x).data), host(GELU()(Tensor(h)).data), rtol=1e-14)


@FEW
@given(b=st.integers(1, 2), t=st.integers(1, 4), heads=st.sampled_from([1, 2]), seed=seeds)
def test_causal_self_attention(b, t, heads, seed):
    rng = np.random.default_rng(seed)
    attn = perturb(CausalSelfAttention(4, heads, rng, dtype=np.float64), rng)
    x = x64(rng, (b, t, 4))
    assert attn(x).shape == (b, t, 4)
    check_module(attn, attn, [x])


@FEW
@given(seed=seeds, p=st.floats(0.1, 0.5))
def test_causal_self_attention_with_dropout_and_a_reseeded_generator(seed, p):
    rng = np.random.default_rng(seed)
    attn = perturb(CausalSelfAttention(4, 2, rng, dropout=p, dtype=np.float64), rng)
    x = x64(rng, (2, 3, 4))

    def forward(t):
        set_dropout_generator(attn, DeviceRandom(seed))
        return attn(t)

    check_module(attn, forward, [x])
    attn.eval()
    first = host(attn(x).data)
    np.testing.assert_array_equal(host(attn(x).data), first)  # eval: no dropout, deterministic
    attn.train()
    assert not np.array_equal(host(attn(x).data), first)


@FEW
@given(b=st.integers(1, 2), t=st.integers(1, 3), seed=seeds)
def test_block(b, t, seed):
    rng = np.random.default_rng(seed)
    block = perturb(Block(4, 2, rng, dtype=np.float64), rng)
    x = x64(rng, (b, t, 4))
    assert block(x).shape == (b, t, 4)
    check_module(block, block, [x])


def test_attention_rejects_indivisible_heads():
    with pytest.raises(ValueError, match="divisible"):
        CausalSelfAttention(6, 4, np.random.default_rng(0))


@FEW
@given(kind=st.sampled_from(MODEL_KINDS), b=st.integers(1, 2), t=st.integers(1, 4), seed=seeds)
def test_language_models_logits(kind, b, t, seed):
    rng = np.random.default_rng(seed)
    model = make_model(kind, seed % 2**31)
    ids = on_device(rng.integers(0, VOCAB, size=(b, t)))
    assert model(ids).shape == (b, t, VOCAB)
    check_module(model, lambda: model(ids))


@FEW
@given(kind=st.sampled_from(MODEL_KINDS), seed=seeds, data=st.data())
def test_language_models_through_lm_loss(kind, seed, data):
    rng = np.random.default_rng(seed)
    model = make_model(kind, seed % 2**31)
    batch = rng.integers(1, VOCAB, size=(2, MAX_LEN + 1))
    batch[0, data.draw(st.integers(2, MAX_LEN + 1)):] = 0  # some padding
    batch = on_device(batch)
    check_module(model, lambda: lm_loss(model, batch))


def test_gpt_rejects_too_long_sequences():
    model = make_model("gpt", 0)
    with pytest.raises(ValueError, match="max_len"):
        model(on_device(np.ones((1, MAX_LEN + 1), dtype=np.int64)))
