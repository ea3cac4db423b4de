"""Attention split by heads and the tensor-parallel block on real ranks equal their
single-device twins: outputs, input gradients and every shard parameter's gradient (the slice
its layout names of the twin's), in float64, for head counts the group size does not divide
(fewer heads than ranks included), with and without dropout, with grouped key/value heads
(split by whole groups) and a feed-forward width of its own."""

import numpy as np
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar import nn
from scratchpar.autograd import Tensor
from scratchpar.device_rng import DeviceRandom
from scratchpar.parallel.tensor.attention import ParallelAttention
from scratchpar.parallel.tensor.block import ParallelBlock
from scratchpar.parallel.tensor.layout import Split, layouts

TIGHT = {"rtol": 1e-10, "atol": 1e-12}
shapes = {"heads": st.integers(1, 5), "per_group": st.sampled_from([1, 1, 2, 3]),
          "d": st.integers(1, 3), "b": st.integers(1, 2),
          "t": st.integers(1, 4), "p": st.sampled_from([0.0, 0.3]), "seed": st.integers(0, 2**31)}


def randomized(module, seed):
    """``module`` with every parameter drawn anew (biases and LayerNorms too): no gradient
    hides behind a zero or a one."""
    rng = np.random.default_rng([seed, 2])
    module.load_state_dict({name: 0.5 * rng.standard_normal(p.shape)
                            for name, p in module.named_parameters()})
    return module


def run_both(shard, twin, seed, b, t, c):
    """The same input, dropout stream and ∂L/∂Y through the shard and its twin, forward and
    backward; then their outputs and input gradients compared (every collective first, so a
    rank that fails leaves none of the others waiting)."""
    nn.set_dropout_generator(twin, DeviceRandom(seed))
    nn.set_dropout_generator(shard, DeviceRandom(seed))
    whole = np.random.default_rng([seed, 1]).standard_normal((b, t, c))
    x, x_twin = (Tensor(on_device(whole), requires_grad=True) for _ in range(2))
    y, y_twin = shard(x), twin(x_twin)
    g = np.random.default_rng([seed, 3]).standard_normal((b, t, c))
    y.backward(on_device(g))
    y_twin.backward(on_device(g))
    np.testing.assert_allclose(host(y.data), host(y_twin.data), **TIGHT)
    np.testing.assert_allclose(host(x.grad), host(x_twin.grad), **TIGHT)  # f's all-reduce


def assert_grads_are_slices(shard, twin, comm):
    """Each shard parameter's gradient is its layout's slice of the twin's (the whole one for
    a replicated parameter), under the twin's names."""
    wanted = dict(twin.named_parameters())
    assert list(dict(shard.named_parameters())) == list(wanted)
    for name, layout in layouts(shard).items():
        got, want = dict(shard.named_parameters())[name].grad, wanted[name].grad
        if isinstance(layout, Split):
            want = layout.take(want, comm.rank, comm.size)
        else:
            assert layout is None, f"{name}: {layout}"
        np.testing.assert_allclose(host(got), host(want), err_msg=name, **TIGHT)


@settings(max_examples=14)
@given(**shapes)
@shared_verdict
def test_parallel_attention_equals_its_twin(comm, heads, per_group, d, b, t, p, seed):
    """``heads`` key/value groups of ``per_group`` query heads each."""
    c = heads * per_group * d
    twin = randomized(nn.CausalSelfAttention(c, heads * per_group, np.random.default_rng(seed),
                                             dropout=p, dtype=np.float64, kv_heads=heads), seed)
    shard = ParallelAttention(twin, comm)
    r = per_group
    rows = (Split(axis=0, view=(heads, d, c)) if r == 1 else
            Split(axis=1, view=(r, heads, d, c)))
    assert layouts(shard) == {"qkv.weight": Split(axis=2, view=(c, r + 2, heads, d)),
                              "qkv.bias": Split(axis=1, view=(r + 2, heads, d)),
                              "proj.weight": rows, "proj.bias": None}
    run_both(shard, twin, seed, b, t, c)
    assert_grads_are_slices(shard, twin, comm)
    assert shard.core.dropout.gen.state == twin.core.dropout.gen.state  # the streams stay in step


@settings(max_examples=10)
@given(**shapes, wide=st.integers(1, 9))
@shared_verdict
def test_parallel_block_equals_its_twin(comm, heads, per_group, d, b, t, p, seed, wide):
    c = heads * per_group * d
    twin = randomized(nn.Block(c, heads * per_group, np.random.default_rng(seed), dropout=p,
                               dtype=np.float64, kv_heads=heads, d_ff=wide), seed)
    shard = ParallelBlock(twin, comm)
    run_both(shard, twin, seed, b, t, c)
    assert_grads_are_slices(shard, twin, comm)


@settings(max_examples=4)
@given(heads=st.integers(1, 5), seed=st.integers(0, 2**31))
@shared_verdict
def test_in_eval_the_block_drops_nothing_and_draws_nothing(comm, heads, seed):
    twin = randomized(nn.Block(heads * 2, heads, np.random.default_rng(seed), dropout=0.5,
                               dtype=np.float64), seed)
    shard = ParallelBlock(twin, comm).eval()
    gen = DeviceRandom(seed)
    nn.set_dropout_generator(shard, gen)
    x = on_device(np.random.default_rng([seed, 1]).standard_normal((2, 3, heads * 2)))
    np.testing.assert_allclose(host(shard(Tensor(x)).data), host(twin.eval()(Tensor(x)).data),
                               **TIGHT)
    assert gen.position == 0
