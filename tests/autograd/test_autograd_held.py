"""The graph keeps what backward reads: an op's output lives while its Tensor is held or an op
saved it, and an op saves an input only for a gradient that needs it."""

import numpy as np
from device_helpers import host, on_device

from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.autograd.held import graph_bytes
from scratchpar.nn.attention import CausalSelfAttention


def test_an_output_no_backward_reads_is_not_kept():
    x = Tensor(on_device(np.random.default_rng(0).standard_normal((3, 4))), requires_grad=True)
    z = F.exp(x * 2.0)  # the product by a constant keeps nothing; exp keeps its own output
    assert graph_bytes(z, []) == 96 + 96  # z's buffer and the leaf's: not the product's
    z.sum().backward()
    np.testing.assert_array_equal(host(x.grad), 2.0 * np.exp(host(x.data) * 2.0))


def test_a_product_keeps_one_side_for_the_other_side_s_gradient():
    rng = np.random.default_rng(1)
    leaf = Tensor(on_device(rng.standard_normal((5, 3))), requires_grad=True)  # 120 B
    w = on_device(rng.standard_normal((3, 2)))  # 48 B
    x = leaf * 2.0  # 120 B more, kept only if w's gradient is wanted
    assert graph_bytes(x @ Tensor(w), []) == 80 + 48 + 120  # the product, w, the leaf
    assert graph_bytes(x @ Tensor(w, requires_grad=True), []) == 80 + 48 + 120 + 120


def test_attention_keeps_one_score_array():
    """Q·Kᵀ, its scaling and its masking are read by no backward: of the four (B, H, T, T)
    arrays forward makes, the graph keeps the softmax's alone, beside the input, Q, K, V, the
    heads joined, the output and the cached causal mask."""
    b, t, c, h = 2, 8, 16, 4
    attn = CausalSelfAttention(c, h, np.random.default_rng(2))
    x = np.random.default_rng(3).standard_normal((b, t, c)).astype(np.float32)
    out = attn(Tensor(on_device(x), requires_grad=True))
    assert graph_bytes(out, attn.parameters()) == 4 * (6 * b * t * c + b * h * t * t) + t * t
