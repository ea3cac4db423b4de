"""A training step on a device never waits for it: no host sync, no copy, from the engine."""

import numpy as np
import pytest
from device_helpers import on_device

from scratchpar import nn
from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.double import watch
from scratchpar.nn.loss import PAD
from scratchpar.optim import SGD, AdamW

VOCAB = 7


def language_model(kind: str, gen: np.random.Generator):
    if kind == "gpt":
        return nn.GPT(VOCAB, 6, d_model=8, n_heads=2, n_layers=2, gen=gen)
    cls = nn.LSTMLanguageModel if kind == "lstm" else nn.RNNLanguageModel
    return cls(VOCAB, 4, 5, gen)


def lm_step(kind: str, gen: np.random.Generator):
    """A step of a language model on a padded batch B (3, 6), pad targets included."""
    model = language_model(kind, gen)
    batch = gen.integers(1, VOCAB, (3, 6))
    batch[0, 4:] = PAD
    batch = on_device(batch)
    return model, lambda: nn.lm_loss(model, batch), AdamW(model.parameters(), lr=1e-3)


def mlp_step(gen: np.random.Generator):
    """A step of an MLP classifier on x (6, 4), y (6,)."""
    model = nn.MLP([4, 5, 3], gen)
    x = Tensor(on_device(gen.standard_normal((6, 4)), np.float32))
    y = on_device(gen.integers(0, 3, 6))
    opt = SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True)
    return model, lambda: F.cross_entropy(model(x), y), opt


@pytest.mark.parametrize("kind", ["gpt", "rnn", "lstm", "mlp"])
def test_forward_backward_and_step_make_no_host_sync(device, kind):
    gen = np.random.default_rng(0)
    model, loss_of, opt = mlp_step(gen) if kind == "mlp" else lm_step(kind, gen)
    for _ in range(2):  # the second step, too: caches (the causal mask) and optimizer state built
        with watch() as seen:
            loss_of().backward()
            opt.step()
            model.zero_grad()
        if device == "double":  # only the double counts what the host waited for
            syncs = seen.syncs_from("scratchpar")
            assert not syncs, f"the engine waited for the device: {syncs}"
            assert not seen.pageable_copies, f"host-device copies: {seen.pageable_copies}"
