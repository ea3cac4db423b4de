"""SavedArrays: what an op saves for backward can be swapped out and back."""

import numpy as np
from device_helpers import host, on_device

from scratchpar.autograd import SavedArrays, Tensor, recording
from scratchpar.autograd import functional as F
from scratchpar.autograd.ops_math import Mul


def test_packed_values_are_unpacked_for_backward_only_and_the_gradients_are_unchanged():
    gen = np.random.default_rng(0)
    x = Tensor(on_device(gen.standard_normal((3, 4))), True)
    w = Tensor(on_device(gen.standard_normal((4, 2))), True)
    stored, packed, unpacked = {}, [], []

    def pack(value):
        if value is w.data:  # the weight leaves the graph: a token stands for it
            packed.append(value)
            stored["w"] = value
            return "token"
        return value

    def unpack(value):
        if isinstance(value, str) and value == "token":
            unpacked.append(value)
            return stored["w"]
        return value

    with recording(SavedArrays(pack, unpack)):
        y = F.linear(x, w)
    loss = (y * y).sum()
    node = y._ctx
    assert node.w == "token" and len(packed) == 1  # the context holds no weight
    loss.backward()
    assert unpacked == ["token"] and node.w == "token"  # unpacked for backward, then dropped
    x2, w2 = Tensor(x.data, True), Tensor(w.data, True)
    (F.linear(x2, w2) ** 2).sum().backward()
    np.testing.assert_array_equal(host(w.grad), host(w2.grad))
    np.testing.assert_array_equal(host(x.grad), host(x2.grad))


def test_without_hooks_nothing_is_packed():
    x = Tensor(on_device(np.ones(3)), True)
    y = x * 2.0
    assert y._ctx.fn is Mul and y._ctx.b == 2.0  # its own backward, on what it saved itself
