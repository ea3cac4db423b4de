"""Towers: k independent Linear–ReLU towers over one input, joined, then a linear head."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from nn_helpers import SOME, check_module, perturb

from scratchpar.autograd import Tensor
from scratchpar.nn import Towers


def by_hand(model, x):
    """The forward in NumPy on the host: each tower's ReLU(x·W + b) stack, joined, the head."""
    outs = []
    for tower in model.towers:
        h = x
        for linear in list(tower)[::2]:
            h = np.maximum(h @ host(linear.weight.data) + host(linear.bias.data), 0)  # (B, H_j)
        outs.append(h)
    joined = np.concatenate(outs, axis=-1)  # (B, k·H)
    return joined @ host(model.head.weight.data) + host(model.head.bias.data)


@SOME
@given(f=st.integers(1, 4), sizes=st.lists(st.integers(1, 3), min_size=1, max_size=2),
       k=st.integers(1, 3), classes=st.integers(1, 3), rows=st.integers(1, 3),
       seed=st.integers(0, 2**32 - 1))
def test_towers_forward_by_hand_and_gradients_by_grad_check(f, sizes, k, classes, rows, seed):
    rng = np.random.default_rng(seed)
    model = perturb(Towers(f, sizes, k, classes, rng, dtype=np.float64), rng)
    x = Tensor(on_device(rng.standard_normal((rows, f))), requires_grad=True)
    np.testing.assert_allclose(host(model(x).data), by_hand(model, host(x.data)), rtol=1e-12,
                               atol=1e-14)
    check_module(model, model, [x])


def test_parameter_names_index_towers_then_the_head():
    model = Towers(3, [4, 5], 2, 2, np.random.default_rng(0))
    assert [name for name, _ in model.named_parameters()] == [
        "towers.0.0.weight", "towers.0.0.bias", "towers.0.2.weight", "towers.0.2.bias",
        "towers.1.0.weight", "towers.1.0.bias", "towers.1.2.weight", "towers.1.2.bias",
        "head.weight", "head.bias"]
    assert model.head.weight.shape == (2 * 5, 2) and (model.k, model.width) == (2, 5)


@pytest.mark.parametrize("k, sizes", [(0, [3]), (2, [])])
def test_towers_refuses_no_tower_or_no_size(k, sizes):
    with pytest.raises(ValueError, match="k ≥ 1"):
        Towers(3, sizes, k, 2, np.random.default_rng(0))
