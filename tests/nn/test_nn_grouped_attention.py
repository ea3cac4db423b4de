"""Grouped-query attention (Ainslie et al. 2023) and a feed-forward width of its own: through
grad_check, and against multi-head attention whose key/value heads repeat each group's, the
meaning of "query head h attends with key/value head h mod G"."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from nn_helpers import FEW, check_module, perturb

from scratchpar.autograd import Tensor
from scratchpar.device_rng import DeviceRandom
from scratchpar.nn import GPT, Block, CausalSelfAttention, set_dropout_generator

seeds = st.integers(0, 2**32 - 1)


def x64(rng, shape):
    return Tensor(on_device(rng.standard_normal(shape)), requires_grad=True)


@FEW
@given(b=st.integers(1, 2), t=st.integers(1, 4), groups=st.sampled_from([1, 2]), seed=seeds,
       p=st.sampled_from([0.0, 0.3]))
def test_grouped_attention_through_grad_check(b, t, groups, seed, p):
    rng = np.random.default_rng(seed)
    attn = perturb(CausalSelfAttention(8, 4, rng, p, np.float64, kv_heads=groups), rng)
    assert attn.qkv.weight.shape == (8, (4 + 2 * groups) * 2)
    x = x64(rng, (b, t, 8))

    def forward(x):
        set_dropout_generator(attn, DeviceRandom(seed))
        return attn(x)

    assert forward(x).shape == (b, t, 8)
    check_module(attn, forward, [x])


@FEW
@given(groups=st.sampled_from([1, 2, 3]), seed=seeds)
def test_each_query_head_attends_with_key_value_head_h_mod_g(groups, seed):
    """Multi-head attention whose head h's key and value columns are group h mod G's equals
    the grouped layer."""
    rng = np.random.default_rng(seed)
    heads, d, c = 6, 2, 12
    grouped = perturb(CausalSelfAttention(c, heads, rng, dtype=np.float64, kv_heads=groups), rng)
    multi = CausalSelfAttention(c, heads, rng, dtype=np.float64)
    r = heads // groups
    w = host(grouped.qkv.weight.data).reshape(c, r + 2, groups, d)
    bias = host(grouped.qkv.bias.data).reshape(r + 2, groups, d)
    q = w[:, :r].reshape(c, heads, d)  # head j·G + g: group g's j-th
    kv = [np.tile(w[:, r + i], (1, r, 1)) for i in (0, 1)]  # head h: group h mod G
    multi.qkv.weight.data[...] = on_device(np.stack([q, *kv], 1).reshape(c, 3 * c))
    multi.qkv.bias.data[...] = on_device(np.stack(
        [bias[:r].reshape(heads, d), *[np.tile(bias[r + i], (r, 1)) for i in (0, 1)]]).ravel())
    multi.proj.weight.data[...] = grouped.proj.weight.data
    multi.proj.bias.data[...] = grouped.proj.bias.data
    x = Tensor(on_device(rng.standard_normal((2, 5, c))))
    np.testing.assert_allclose(host(multi(x).data), host(grouped(x).data), rtol=1e-12,
                               atol=1e-13)


def test_one_group_per_head_is_multi_head_attention_bit_for_bit():
    one, many = (CausalSelfAttention(8, 4, np.random.default_rng(3), dtype=np.float64,
                                     kv_heads=g) for g in (4, None))
    x = Tensor(on_device(np.random.default_rng(4).standard_normal((2, 5, 8))))
    np.testing.assert_array_equal(host(one(x).data), host(many(x).data))


@FEW
@given(wide=st.sampled_from([3, 10]), seed=seeds)
def test_a_block_of_its_own_feed_forward_width(wide, seed):
    rng = np.random.default_rng(seed)
    block = perturb(Block(4, 2, rng, dtype=np.float64, kv_heads=1, d_ff=wide), rng)
    assert block.mlp[0].weight.shape == (4, wide) and block.mlp[2].weight.shape == (wide, 4)
    x = x64(rng, (2, 3, 4))
    check_module(block, block, [x])


def test_a_gpt_counts_the_grouped_heads_and_the_width():
    c, heads, groups, wide, layers, vocab, t = 16, 4, 2, 24, 2, 7, 5
    model = GPT(vocab, t, c, heads, layers, np.random.default_rng(0), kv_heads=groups, d_ff=wide)
    d = c // heads
    block = (2 * c + (c + 1) * (heads + 2 * groups) * d + c * c + c + 2 * c
             + (c + 1) * wide + (wide + 1) * c)
    assert sum(p.size for p in model.parameters()) == (vocab + t) * c + layers * block \
        + 2 * c + c * vocab


def test_key_value_heads_must_divide_the_query_heads():
    with pytest.raises(ValueError, match="n_heads by kv_heads 3"):
        CausalSelfAttention(8, 4, np.random.default_rng(0), kv_heads=3)
