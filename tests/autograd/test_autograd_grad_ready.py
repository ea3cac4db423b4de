"""backward(hooks=GradReady(…)): each leaf reported once, when its gradient is already final."""

import numpy as np
from autograd_helpers import PROPERTY, normal, seeds
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st

from scratchpar import nn
from scratchpar.autograd import GradReady, Tensor
from scratchpar.autograd import functional as F


def tied(x, w, b):
    """w is used twice, far apart in the graph (as tied embedding and output weights are)."""
    h = F.tanh(x @ w + b)  # (N, K)
    return (F.sigmoid(h @ w.transpose()) * x).sum() + (w * w).mean()  # w (D, K) again


def record(loss, leaves):
    """Backward with a callback; the snapshots of each reported leaf's grad, in report order."""
    seen = []
    loss.backward(hooks=GradReady(lambda leaf: seen.append((leaf, leaf.grad.copy()))))
    assert sorted(id(leaf) for leaf, _ in seen) == sorted(id(leaf) for leaf in leaves)
    for leaf, snapshot in seen:
        np.testing.assert_array_equal(host(snapshot), host(leaf.grad))  # final when reported
    return [leaf for leaf, _ in seen]


@PROPERTY
@given(n=st.integers(1, 4), d=st.integers(1, 4), k=st.integers(1, 4), seed=seeds)
def test_each_leaf_once_with_its_final_grad_tied_weight_included(n, d, k, seed):
    rng = np.random.default_rng(seed)
    x, w, b = normal(rng, (n, d)), normal(rng, (d, k)), normal(rng, (k,))
    record(tied(x, w, b), [x, w, b])
    once = [host(g).copy() for g in (x.grad, w.grad, b.grad)]
    record(tied(x, w, b), [x, w, b])  # accumulating onto earlier grads: reported at the sum
    for leaf, g in zip((x, w, b), once):
        np.testing.assert_allclose(host(leaf.grad), 2 * g, rtol=1e-12, atol=1e-12)


def test_leaves_off_the_path_and_constants_are_not_reported():
    rng = np.random.default_rng(0)
    a, unused = normal(rng, (3,)), normal(rng, (3,))
    const = Tensor(on_device(rng.standard_normal(3)))  # requires no grad
    record((a * const).sum(), [a])
    assert unused.grad is None


def test_a_model_reports_every_parameter_once_output_layer_first():
    model = nn.MLP([4, 5, 3], np.random.default_rng(1), np.float64)
    x = Tensor(on_device(np.random.default_rng(2).standard_normal((6, 4))))
    y = on_device(np.array([0, 1, 2, 0, 1, 2]))
    order = record(F.cross_entropy(model(x), y, reduction="sum"), model.parameters())
    last = model.parameters()[-2:]  # the output layer's weight and bias
    assert {id(p) for p in order[:2]} == {id(p) for p in last}
