"""Fused ops against PyTorch (where installed): values and gradients in float64."""

import numpy as np
import pytest
from autograd_helpers import PROPERTY, leaf, seeds
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.autograd import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def both(array):
    """The same values as a scratchpar leaf and a torch leaf."""
    return leaf(array), torch.tensor(array, dtype=torch.float64, requires_grad=True)


def assert_same(ours, theirs, rtol=1e-11, atol=1e-13):
    np.testing.assert_allclose(host(ours.data), theirs.detach().numpy(), rtol=rtol, atol=atol)


@PROPERTY
@given(n=st.integers(1, 5), v=st.integers(2, 5), seed=seeds,
       reduction=st.sampled_from(["mean", "sum"]), scale=st.sampled_from([1.0, 100.0]))
def test_cross_entropy_with_ignore_index_matches_torch(n, v, seed, reduction, scale):
    rng = np.random.default_rng(seed)
    targets = rng.integers(0, v, n)
    targets[rng.random(n) < 0.3] = -100
    targets[0] = 0  # at least one counted target: torch's mean of none is nan, ours is 0
    ours, theirs = both(scale * rng.standard_normal((n, v)))
    loss = F.cross_entropy(ours, on_device(targets), reduction=reduction)
    ref = TF.cross_entropy(theirs, torch.tensor(targets), ignore_index=-100, reduction=reduction)
    assert_same(loss, ref)
    loss.backward()
    ref.backward()
    np.testing.assert_allclose(host(ours.grad), theirs.grad.numpy(), rtol=1e-10, atol=1e-14)


@PROPERTY
@given(b=st.integers(1, 3), d=st.integers(2, 6), seed=seeds)
def test_layer_norm_gelu_log_softmax_match_torch(b, d, seed):
    rng = np.random.default_rng(seed)
    x, tx = both(rng.standard_normal((b, d)))
    g, tg = both(1.0 + 0.5 * rng.standard_normal(d))
    beta, tbeta = both(rng.standard_normal(d))
    w = rng.standard_normal((b, d))
    out = F.log_softmax(F.gelu(F.layer_norm(x, g, beta)), axis=-1)
    ref = TF.log_softmax(TF.gelu(TF.layer_norm(tx, (d,), tg, tbeta, eps=1e-5),
                                 approximate="tanh"), dim=-1)
    assert_same(out, ref)
    out.backward(w)
    ref.backward(torch.tensor(w))
    for ours, theirs in ((x, tx), (g, tg), (beta, tbeta)):
        np.testing.assert_allclose(host(ours.grad), theirs.grad.numpy(), rtol=1e-10, atol=1e-12)
