"""Context-parallel attention equals one device's attention, causal or not: each rank of a cp
group holds its positions of q, k and v, and its output and the gradients of its q, k and v are
one device's rows at those positions, in float64 to 1e-12, under the ring, all-gather and Ulysses
schemes, the zig-zag and the contiguous layouts, with a key/value head for each query head or
for a group of them; in 16 bits the ring rounds only its results."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.autograd import Tensor
from scratchpar.autograd.precision import PrecisionError, dtype_of
from scratchpar.backend import xp_default
from scratchpar.nn.attention import AttentionCore, attend
from scratchpar.parallel.context import SCHEMES, Context, ContextError, UlyssesAttention, positions


def one_device(q, k, v, grad, causal=True):
    """The output and the gradients of q, k, v (host arrays) of one device's attention,
    causal or seeing every key."""
    leaves = [Tensor(on_device(a), requires_grad=True) for a in (q, k, v)]
    out = AttentionCore()(*leaves) if causal else attend(*leaves)
    out.backward(on_device(grad))
    return host(out.data), [host(t.grad) for t in leaves]


def context(comm, scheme, layout, q, k, v, grad, causal=True):
    """This rank's output and gradients under ``scheme``, and the positions it holds."""
    context = Context(comm, layout)
    mine = context.mine(q.shape[2])
    leaves = [Tensor(on_device(np.ascontiguousarray(a[:, :, mine])), requires_grad=True)
              for a in (q, k, v)]
    out = SCHEMES[scheme](context, causal)(*leaves)
    out.backward(on_device(np.ascontiguousarray(grad[:, :, mine])))
    return host(out.data), [host(t.grad) for t in leaves], mine


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("layout", ["zigzag", "contiguous"])
@settings(max_examples=5)
@given(chunk=st.integers(1, 3), groups=st.integers(1, 2), per_group=st.sampled_from([1, 3]),
       batch=st.integers(1, 2), causal=st.booleans(), seed=st.integers(0, 2**31))
@shared_verdict
def test_every_rank_gets_one_device_s_rows(comm, scheme, layout, chunk, groups, per_group,
                                           batch, causal, seed):
    t = 2 * comm.size * chunk
    gen = np.random.default_rng(seed)
    kv = (batch, groups * comm.size, t, 4)  # Ulysses splits the key/value heads over the ranks
    q, grad = (gen.standard_normal((batch, per_group * kv[1], t, 4)) for _ in range(2))
    k, v = (gen.standard_normal(kv) for _ in range(2))
    want, want_grads = one_device(q, k, v, grad, causal)
    cp = comm.dup(name="cp")
    try:
        got, grads, mine = context(cp, scheme, layout, q, k, v, grad, causal)
    finally:
        cp.free()
    np.testing.assert_allclose(got, want[:, :, mine], rtol=1e-12, atol=1e-12)
    for name, g, w in zip("qkv", grads, want_grads):
        np.testing.assert_allclose(g, w[:, :, mine], rtol=1e-12, atol=1e-12, err_msg=name)


def test_ulysses_refuses_heads_the_ranks_cannot_share(comm):
    if comm.size < 2:
        pytest.skip("one rank takes any number of heads")
    q = Tensor(on_device(np.zeros((1, comm.size + 1, 2, 4))))
    with pytest.raises(ContextError, match=f"{comm.size + 1} do not divide by cp = "):
        UlyssesAttention(Context(comm))(q, q, q)


def test_a_sequence_the_layout_cannot_cut_is_refused():
    with pytest.raises(ContextError, match="10 tokens do not divide by 4"):
        positions(10, 2, 0, "zigzag")
    assert positions(8, 2, 0).tolist() == [0, 1, 6, 7]
    assert positions(8, 2, 1, "contiguous").tolist() == [4, 5, 6, 7]


@pytest.mark.parametrize("precision, eps", [("bf16", 2.0**-8), ("fp16", 2.0**-11)])
def test_in_16_bits_the_ring_rounds_once(comm, precision, eps):
    """The blocks merge and dK, dV travel in fp32, so the ring's only error in 16 bits is the
    rounding of its results: within a few units in the last place of one device's attention
    computed in float64 on the same 16-bit inputs, at any number of ranks."""
    try:
        dtype = dtype_of(precision, xp_default())
    except PrecisionError as e:  # bf16 on a backend without it
        pytest.skip(str(e))
    t = 2 * comm.size * 8
    gen = np.random.default_rng(4)
    q, k, v, grad = (gen.standard_normal((2, 2, t, 16)).astype(dtype) for _ in range(4))
    want, want_grads = one_device(*(a.astype(np.float64) for a in (q, k, v, grad)))
    cp = comm.dup(name="cp")
    try:
        got, grads, mine = context(cp, "ring", "zigzag", q, k, v, grad)
    finally:
        cp.free()
    for g, w in zip([got, *grads], [want, *want_grads]):
        w = w[:, :, mine]
        assert g.dtype == dtype
        assert np.abs(g.astype(np.float64) - w).max() <= 4 * eps * np.abs(w).max()
