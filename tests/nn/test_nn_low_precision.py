"""Whole models in fp16 and bf16 against the same models in float64: the loss and every
parameter's gradient, on the same (rounded) weights, batch and dropout masks.

The 16-bit model is built in float64, perturbed off its initialization, and each parameter's
``.data`` rounded to the format; its float64 twin holds the same rounded values. Every op that
rounds moves its result by at most u of itself (fp16 u = 2⁻¹¹, bf16 u = 2⁻⁸), about u/√3 in
the mean square, and the errors of independent roundings add in quadrature. A result that
passes through n roundings forward and back is then off by about u·√(n/3), norm-wise: each
model allows u·√n, n counted along its longest path. The loss itself is computed in fp32.
"""

import math

import numpy as np
import pytest
from device_helpers import host, on_device
from nn_helpers import perturb

from scratchpar import nn
from scratchpar.autograd import Tensor, no_grad
from scratchpar.autograd import functional as F
from scratchpar.device_rng import DeviceRandom
from scratchpar.nn import (
    GPT,
    MLP,
    Linear,
    LSTMLanguageModel,
    half_squared_error,
    lm_loss,
    set_dropout_generator,
)

UNIT = {"fp16": 2.0**-11, "bf16": 2.0**-8}
VOCAB, SEQ = 12, 10
# Roundings on the longest path, forward and back. GPT: 2 blocks of 15 ops that round (layer
# norm, qkv, QKᵀ, its scale, softmax, dropout, the product with V, the projection, the residual
# sum; layer norm, two linears, GELU, dropout, the residual sum), 4 around them: 34 forward;
# back, each op's gradient once more, the saved x̂, softmax and σ of GELU, and the sums of a
# residual's two gradients: 19 a block, 6 around them, 44. LSTM: 2 layers of 10 steps, each
# step's state through about 6 roundings (the product with W_h, its sum, the gates, f⊙c + i⊙g,
# tanh c, o ⊙ tanh c): 122 with the head, as many back. MLP: 3 linears forward; back, the
# loss's gradient, its saved softmax and the 3 linears' gradients.
ROUNDINGS = {"gpt": 34 + 44, "lstm": 2 * 122, "mlp": 3 + 5}
KINK_MARGIN = 0.05  # of a layer's RMS: ~10 bf16 roundings of a pre-activation


def build(kind: str, seed: int):
    gen = np.random.default_rng(seed)
    if kind == "gpt":
        model = GPT(VOCAB, SEQ, 16, 2, 2, gen, dropout=0.1, dtype=np.float64)
    elif kind == "lstm":
        model = LSTMLanguageModel(VOCAB, 8, 12, gen, dtype=np.float64, n_layers=2)
    else:
        model = MLP([10, 24, 24, 5], gen, dtype=np.float64)
    return perturb(model, np.random.default_rng(seed + 1), scale=0.1)


def twins(kind: str, seed: int, dtype):
    """The model with its parameters rounded to ``dtype``, and a float64 one holding the same
    values; both draw their dropout masks from one stream."""
    low, exact = build(kind, seed), build(kind, seed)
    for p, q in zip(low.parameters(), exact.parameters()):
        p.data = p.data.astype(dtype)
        q.data = p.data.astype(np.float64)
    for model in (low, exact):
        set_dropout_generator(model, DeviceRandom(seed))
    return low, exact


def clear_of_the_kink(model, x):
    """The rows of ``x`` whose every pre-activation before a ReLU in the float64 ``model`` is
    KINK_MARGIN of its layer's RMS away from 0: there, a rounding that flips its sign would
    change the gradient by a whole term, which no rounding bound covers."""
    clear, h = np.ones(len(x), dtype=bool), Tensor(on_device(x))
    with no_grad():
        for module in model:
            h = module(h)
            if isinstance(module, Linear) and module is not model[-1]:
                z = host(h.data)  # (B, F)
                clear &= (np.abs(z) > KINK_MARGIN * np.sqrt(np.mean(z * z))).all(axis=1)
    return x[clear]


def batch_for(kind: str, seed: int, exact, dtype):
    """(inputs, targets) of an MLP, whose inputs are rounded to ``dtype``; or token ids (B, T+1)
    with padding."""
    rng = np.random.default_rng(seed + 2)
    if kind == "mlp":
        x = rng.standard_normal((400, 10)).astype(dtype).astype(np.float64)
        x = clear_of_the_kink(exact, x)[:16]
        assert len(x) == 16, "too few samples clear of the kink"
        return x, rng.integers(0, 5, size=16)
    ids = rng.integers(1, VOCAB, size=(4, SEQ + 1))
    ids[0, 7:] = 0  # padding: targets the loss skips
    return ids


def loss_of(kind: str, model, batch, dtype):
    if kind == "mlp":
        x, y = batch
        return F.cross_entropy(model(Tensor(on_device(x.astype(dtype)))), on_device(y))
    return lm_loss(model, on_device(batch))


@pytest.mark.parametrize("kind", ["gpt", "lstm", "mlp"])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_16_bit_model_matches_float64(kind, seed, low):
    fmt, dtype = low
    tolerance = UNIT[fmt] * math.sqrt(ROUNDINGS[kind])
    model, exact = twins(kind, seed, dtype)
    batch = batch_for(kind, seed, exact, dtype)
    loss, ref = loss_of(kind, model, batch, dtype), loss_of(kind, exact, batch, np.float64)
    assert loss.dtype == np.float32
    loss.backward()
    ref.backward()
    assert abs(loss.item() - ref.item()) <= tolerance * abs(ref.item())
    for (name, p), q in zip(model.named_parameters(), exact.parameters()):
        assert p.data.dtype == dtype and p.grad.dtype == dtype, name
        got, want = host(p.grad).astype(np.float64), host(q.grad)
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert err <= tolerance, f"{name}: off by {err:.2e}, allowed {tolerance:.2e}"


def test_dropout_masks_the_same_entries_in_16_bits(low):
    """The GPT's dropout draws the same masks in 16 bits as in float64 (one counter-based
    stream): the entries it zeroes are the same."""
    _, dtype = low
    model, exact = twins("gpt", 3, dtype)
    ids = on_device(batch_for("gpt", 3, exact, dtype)[:, :-1])
    embed, embed_exact = model.pipeline_layers()[0], exact.pipeline_layers()[0]
    zeros, zeros_exact = host(embed(ids).data) == 0, host(embed_exact(ids).data) == 0
    assert zeros.any() and (zeros == zeros_exact).all()


def test_half_squared_error_is_fp32_and_its_gradient_16_bit(low):
    """The regression loss of 16-bit predictions is computed in fp32, as the cross-entropies:
    within fp32's rounding of float64, and its gradient within one 16-bit rounding."""
    fmt, dtype = low
    rng = np.random.default_rng(4)
    pred = rng.standard_normal(32).astype(dtype)
    target = on_device(rng.standard_normal(32))
    losses, grads = [], []
    for values in (pred, pred.astype(np.float64)):
        leaf = Tensor(on_device(values), requires_grad=True)
        loss = half_squared_error(leaf, target)
        loss.backward()
        losses.append(loss)
        grads.append(host(leaf.grad))
    assert losses[0].dtype == np.float32 and grads[0].dtype == dtype
    np.testing.assert_allclose(losses[0].item(), losses[1].item(), rtol=2.0**-20)
    assert np.linalg.norm(grads[0] - grads[1]) <= UNIT[fmt] * np.linalg.norm(grads[1])


def test_to_dtype_casts_every_parameter_once_and_keeps_ties():
    model = nn.GPT(11, 8, 16, 2, 2, np.random.default_rng(0), tie_embeddings=True)
    before = {name: host(p.data).copy() for name, p in model.named_parameters()}
    assert model.to_dtype(np.float16) is model
    for name, p in model.named_parameters():
        assert p.data.dtype == np.float16
        np.testing.assert_array_equal(host(p.data), before[name].astype(np.float16))
    assert model.head.weight.data is model.tok.weight.data  # still tied, cast once
