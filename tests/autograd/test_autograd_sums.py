"""Backward's sums (``autograd/sums.py``): a slice's gradient is written into one buffer of its
tensor's, bit for bit the sum of whole zero arrays, and no array an op still holds is written."""

import numpy as np
from device_helpers import host, on_device

from scratchpar import nn
from scratchpar.autograd import Function, Tensor
from scratchpar.autograd import functional as F
from scratchpar.autograd.ops_shape import GetItem
from scratchpar.autograd.sums import Partial, Sums
from scratchpar.backend import get_array_module


def whole_slices(monkeypatch):
    """GetItem's backward as it was: a whole zero array with the slice's gradient in it."""
    partial = GetItem.backward

    def whole(ctx, g):
        found = partial(ctx, g)
        return found.whole() if type(found) is Partial else found

    monkeypatch.setattr(GetItem, "backward", staticmethod(whole))


def lstm_grads(seed: int = 0) -> dict:
    gen = np.random.default_rng(seed)
    model = nn.LSTMLanguageModel(13, 5, 7, gen, dtype=np.float64, n_layers=2)
    nn.lm_loss(model, on_device(gen.integers(1, 13, (3, 12)))).backward()
    return {name: host(p.grad) for name, p in model.named_parameters()}


def test_an_lstm_s_gradients_are_those_of_whole_slices_bit_for_bit(monkeypatch):
    sliced = lstm_grads()
    whole_slices(monkeypatch)
    for name, grad in lstm_grads().items():
        assert np.array_equal(sliced[name], grad), name


def test_overlapping_slices_and_the_whole_sum_as_whole_arrays(monkeypatch):
    gen = np.random.default_rng(1)
    data = on_device(gen.standard_normal((4, 6)))
    weights = [on_device(gen.standard_normal(s)) for s in ((2, 6), (3, 6), (4, 6), (4, 3))]

    def grad_of():
        x = Tensor(data, requires_grad=True)
        parts = [x[1:3], x[0:3], x, x[:, ::2]]  # two overlapping slices, the whole, a stride
        F.sum(F.add(F.sum(F.mul(parts[0], weights[0])), F.sum(F.mul(parts[1], weights[1])))
              + F.sum(F.mul(parts[2], weights[2])) + F.sum(F.mul(parts[3], weights[3]))).backward()
        return host(x.grad)

    sliced = grad_of()
    whole_slices(monkeypatch)
    assert np.array_equal(sliced, grad_of())


class Held(Function):
    """y = 2·x, whose backward hands back an array it keeps (as an op may)."""

    kept = None

    @staticmethod
    def forward(ctx, a):
        return 2 * a

    @staticmethod
    def backward(ctx, g):
        Held.kept = 2 * g
        return Held.kept


def test_an_array_an_op_holds_is_copied_before_a_slice_is_added_to_it():
    x = Tensor(on_device(np.ones((3, 2))), requires_grad=True)
    y = Held.apply(x)  # y's gradient comes back as the array Held keeps
    F.sum(F.add(F.sum(y), F.sum(x[0]))).backward()
    assert np.array_equal(host(Held.kept), np.full((3, 2), 2.0))  # untouched
    assert np.array_equal(host(x.grad), [[3.0, 3.0], [2.0, 2.0], [2.0, 2.0]])


def test_slices_of_one_tensor_fill_one_buffer_made_once(monkeypatch):
    made = []
    whole = Partial.whole
    monkeypatch.setattr(Partial, "whole", lambda self: made.append(1) or whole(self))
    xp = get_array_module(on_device(np.zeros(1)))
    sums = Sums()
    for t in range(5):  # five time steps of a (2, 5, 3) input
        sums.add(7, Partial((2, 5, 3), (slice(None), t), xp.full((2, 3), float(t + 1))))
    total = host(sums.pop(7))
    assert len(made) == 1
    assert np.array_equal(total, np.broadcast_to(np.arange(1.0, 6.0)[None, :, None], (2, 5, 3)))
    assert sums.pop(7) is None
