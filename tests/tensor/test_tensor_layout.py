"""Split layouts: the shards of a whole tensor join back to it, bit for bit, for any group
size, divisible or not, including views that split a fused QKV weight by heads."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from scratchpar import nn
from scratchpar.parallel.tensor import ColumnParallelLinear, ParallelFeedForward, RowParallelLinear
from scratchpar.parallel.tensor.layout import PARTIAL, Split, layouts


@given(rows=st.integers(0, 7), cols=st.integers(0, 7), axis=st.integers(0, 1),
       size=st.integers(1, 4))
def test_shards_join_back_to_the_whole(rows, cols, axis, size):
    whole = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
    split = Split(axis)
    parts = [split.take(whole, r, size) for r in range(size)]
    assert [p.shape for p in parts] == [split.shard_shape(whole.shape, r, size)
                                        for r in range(size)]
    np.testing.assert_array_equal(split.join(parts), whole)
    assert not any(np.shares_memory(p, whole) for p in parts)  # a shard is its rank's own


@given(c=st.integers(1, 5), heads=st.integers(1, 5), d=st.integers(1, 3), size=st.integers(1, 4))
def test_a_fused_qkv_weight_splits_by_heads(c, heads, d, size):
    whole = np.arange(c * 3 * heads * d, dtype=np.float64).reshape(c, 3 * heads * d)
    split = Split(axis=2, view=(c, 3, heads, d))
    parts = [split.take(whole, r, size) for r in range(size)]
    first = parts[0].reshape(c, 3, -1, d)  # rank 0: heads 0 … h₀−1 of q, of k and of v
    h0 = first.shape[2]
    for j in range(3):
        np.testing.assert_array_equal(first[:, j], whole[:, j * heads * d:(j * heads + h0) * d]
                                      .reshape(c, h0, d))
    np.testing.assert_array_equal(split.join(parts), whole)
    bias = np.arange(3 * heads * d, dtype=np.float64)
    bias_split = Split(axis=1, view=(3, heads, d))
    np.testing.assert_array_equal(
        bias_split.join([bias_split.take(bias, r, size) for r in range(size)]), bias)
    proj = np.arange(heads * d * c, dtype=np.float64).reshape(heads * d, c)
    rows = Split(axis=0, view=(heads, d, c))  # the output projection's rows, by heads
    parts = [rows.take(proj, r, size) for r in range(size)]
    assert sum(p.shape[0] for p in parts) == heads * d and all(p.shape[0] % d == 0 for p in parts)
    np.testing.assert_array_equal(rows.join(parts), proj)


class _FakeComm:
    rank, size = 0, 2


def test_layouts_name_every_parameter_as_the_single_device_model_does():
    block = nn.Block(4, 2, np.random.default_rng(0), dtype=np.float64)
    mlp = ParallelFeedForward(block.mlp, _FakeComm())
    assert layouts(mlp) == {"0.weight": Split(1), "0.bias": Split(0), "2.weight": Split(0),
                            "2.bias": None}
    assert set(dict(mlp.named_parameters())) == set(dict(block.mlp.named_parameters()))
    assert PARTIAL not in layouts(ColumnParallelLinear(block.mlp[0], _FakeComm())).values()
    assert layouts(RowParallelLinear(block.mlp[2], _FakeComm()))["bias"] is None
