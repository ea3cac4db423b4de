"""Megatron's column- and row-parallel linear layers and the parallel MLP on real ranks equal
their single-device twins: outputs, input gradients and each rank's weight slices' gradients,
in float64, for sizes the group size does not divide."""

import numpy as np
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar import nn
from scratchpar.autograd import Tensor
from scratchpar.comm.chunks import bounds
from scratchpar.parallel.tensor import ColumnParallelLinear, ParallelFeedForward, RowParallelLinear

TIGHT = {"rtol": 1e-10, "atol": 1e-12}
sizes = st.integers(1, 9)  # as few features as ranks, or fewer, and not divisible by them


def mine(comm, n: int) -> slice:
    start, stop = bounds(n, comm.size)[comm.rank]
    return slice(start, stop)


def backward_both(out, twin_out, seed):
    """The same random ∂L/∂Y through both; returns it."""
    g = np.random.default_rng([seed, 3]).standard_normal(host(twin_out.data).shape)
    out.backward(on_device(g))
    twin_out.backward(on_device(g))


def inputs(seed, *shape):
    x = np.random.default_rng([seed, 1]).standard_normal(shape)
    return Tensor(on_device(x), requires_grad=True), Tensor(on_device(x), requires_grad=True)


@settings(max_examples=10)
@given(d=sizes, f=sizes, rows=st.integers(1, 4), gather=st.booleans(), bias=st.booleans(),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_column_parallel_linear_equals_its_twin(comm, d, f, rows, gather, bias, seed):
    twin = nn.Linear(d, f, np.random.default_rng(seed), bias=bias, dtype=np.float64)
    layer = ColumnParallelLinear(twin, comm, gather_output=gather)
    x, x_twin = inputs(seed, rows, 2, d)
    y, y_twin = layer(x), twin(x_twin)
    cols = slice(None) if gather else mine(comm, f)
    np.testing.assert_allclose(host(y.data), host(y_twin.data)[..., cols], **TIGHT)
    g = np.random.default_rng([seed, 3]).standard_normal(host(y_twin.data).shape)
    y.backward(on_device(g[..., cols]))
    y_twin.backward(on_device(g))
    np.testing.assert_allclose(host(x.grad), host(x_twin.grad), **TIGHT)  # f's all-reduce
    np.testing.assert_allclose(host(layer.weight.grad), host(twin.weight.grad)[:, mine(comm, f)],
                               **TIGHT)
    if bias:
        np.testing.assert_allclose(host(layer.bias.grad), host(twin.bias.grad)[mine(comm, f)],
                                   **TIGHT)


@settings(max_examples=10)
@given(d=sizes, f=sizes, rows=st.integers(1, 4), bias=st.booleans(), seed=st.integers(0, 2**31))
@shared_verdict
def test_row_parallel_linear_equals_its_twin(comm, d, f, rows, bias, seed):
    twin = nn.Linear(d, f, np.random.default_rng(seed), bias=bias, dtype=np.float64)
    layer = RowParallelLinear(twin, comm)
    whole = np.random.default_rng([seed, 1]).standard_normal((rows, 2, d))
    x = Tensor(on_device(whole[..., mine(comm, d)]), requires_grad=True)  # (.., D/T)
    x_twin = Tensor(on_device(whole), requires_grad=True)
    y, y_twin = layer(x), twin(x_twin)
    np.testing.assert_allclose(host(y.data), host(y_twin.data), **TIGHT)
    backward_both(y, y_twin, seed)
    np.testing.assert_allclose(host(x.grad), host(x_twin.grad)[..., mine(comm, d)], **TIGHT)
    np.testing.assert_allclose(host(layer.weight.grad), host(twin.weight.grad)[mine(comm, d)],
                               **TIGHT)
    if bias:  # replicated: every rank holds the whole gradient
        np.testing.assert_allclose(host(layer.bias.grad), host(twin.bias.grad), **TIGHT)


@settings(max_examples=8)
@given(c=st.integers(1, 6), rows=st.integers(1, 3), seed=st.integers(0, 2**31))
@shared_verdict
def test_parallel_mlp_equals_the_blocks_mlp_with_one_all_reduce_each_way(comm, c, rows, seed):
    block = nn.Block(c * 2, 2, np.random.default_rng(seed), dtype=np.float64)
    layer = ParallelFeedForward(block.mlp, comm)
    x, x_twin = inputs(seed, rows, 3, c * 2)
    y, y_twin = layer(x), block.mlp(x_twin)
    np.testing.assert_allclose(host(y.data), host(y_twin.data), **TIGHT)
    backward_both(y, y_twin, seed)
    np.testing.assert_allclose(host(x.grad), host(x_twin.grad), **TIGHT)
    fc, _, proj, _ = list(block.mlp)
    shard_fc, _, shard_proj, _ = list(layer)
    hidden = mine(comm, fc.weight.shape[1])
    for got, want in ((shard_fc.weight, fc.weight.grad[:, hidden]),
                      (shard_fc.bias, fc.bias.grad[hidden]),
                      (shard_proj.weight, proj.weight.grad[hidden]),
                      (shard_proj.bias, proj.bias.grad)):
        np.testing.assert_allclose(host(got.grad), host(want), **TIGHT)
