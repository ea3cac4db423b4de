"""A backward that leaves the weights' gradients for later (a zero-bubble pipeline's B, then W)
gives every gradient the one backward gives, bit for bit: the inputs' at once, the weights'
when run, each weight's several uses summed in the same order."""

import numpy as np
import pytest
from device_helpers import host, on_device

from scratchpar import nn
from scratchpar.autograd import Tensor, Weights
from scratchpar.autograd import functional as F


def model_and_batch(kind: str):
    gen = np.random.default_rng(0)
    if kind == "gpt":  # the tied embedding is read twice, by the lookup and by the head
        model = nn.GPT(11, 6, 8, 2, 2, gen, dtype=np.float64, tie_embeddings=True)
        ids = on_device(gen.integers(1, 11, (3, 7)))
        return model, [], lambda: nn.lm_loss(model, ids)
    model = nn.MLP([5, 7, 3], gen, dtype=np.float64)
    x = Tensor(on_device(gen.standard_normal((4, 5))), requires_grad=True)
    y = on_device(np.array([0, 2, 1, 2]))
    return model, [x], lambda: F.cross_entropy(model(x), y)


class Reported(Weights):
    """Weights that list each leaf whose gradient is final, in B and in W."""

    def __init__(self, leaves):
        super().__init__(leaves)
        self.ready = []

    def grad_ready(self, leaf):
        self.ready.append(leaf)


@pytest.mark.parametrize("kind", ["gpt", "mlp"])
def test_weights_later_equal_one_backward_bitwise(kind):
    model, inputs, loss = model_and_batch(kind)
    params = model.parameters()
    loss().backward()
    fused = [host(p.grad).copy() for p in params]
    fused_inputs = [host(x.grad).copy() for x in inputs]
    for p in [*params, *inputs]:
        p.grad = None

    weights = Reported(params)
    loss().backward(hooks=weights)
    assert all(p.grad is None for p in params)  # B: the inputs' gradients alone
    assert sorted(map(id, weights.ready)) == sorted(map(id, inputs))
    for x, want in zip(inputs, fused_inputs):
        assert host(x.grad).tobytes() == want.tobytes()
    weights.ready = []
    weights.run()
    assert sorted(map(id, weights.ready)) == sorted(map(id, params))  # W: each weight once
    for p, want in zip(params, fused):
        assert host(p.grad).tobytes() == want.tobytes()
