"""Activation recomputation equals keeping the activations, bit for bit: the gradients, with
dropout on and gradients accumulated over two backward passes, and the parameters after an
update; and it holds less at its peak."""

import numpy as np
import pytest
from device_helpers import host, on_device

from scratchpar import nn
from scratchpar.autograd import functional as F
from scratchpar.autograd import no_grad
from scratchpar.device_rng import DeviceRandom
from scratchpar.nn.attention import AttentionCore
from scratchpar.nn.recompute import recompute
from scratchpar.optim import AdamW
from scratchpar.optim.mixed import MixedPrecision
from scratchpar.peak import peak_bytes

VOCAB, SEQ = 11, 9


def make(kind: str, dtype):
    gen = np.random.default_rng(0)
    if kind == "mlp":
        return nn.MLP([6, 12, 12, 4], gen, dtype)
    if kind == "lstm":
        return nn.LSTMLanguageModel(VOCAB, 8, 10, gen, dtype, n_layers=2)
    return nn.GPT(VOCAB, SEQ, 16, 2, 3, gen, dropout=0.2, dtype=dtype,
                  tie_embeddings=kind == "tied")


def loss(kind, model, step: int):
    gen = np.random.default_rng([1, step])
    if kind == "mlp":
        x = on_device(gen.standard_normal((5, 6)), model.parameters()[0].dtype)
        return F.cross_entropy(model(x), on_device(gen.integers(0, 4, 5)))
    return nn.lm_loss(model, on_device(gen.integers(0, VOCAB, (4, SEQ + 1))))


def again(model, mode: str) -> None:
    """Mark ``model``'s layers for recomputation: all but the last, or the attention cores."""
    if mode == "full":
        recompute(model.pipeline_layers()[:-1])
    elif mode == "selective":
        recompute([m for _, m in model.named_modules() if isinstance(m, AttentionCore)])


def trained(kind: str, dtype, mode: str):
    """Two accumulated backward passes, an AdamW step, a third backward: every gradient and
    the parameters, on the host, all finite."""
    model = make(kind, dtype)
    nn.set_dropout_generator(model, DeviceRandom(3))
    again(model, mode)
    optimizer = AdamW(model.parameters(), 1e-2)
    if dtype == np.float16:  # 16-bit weights step through fp32 masters
        optimizer = MixedPrecision(optimizer)
    loss(kind, model, 0).backward()
    loss(kind, model, 1).backward()
    seen = [host(p.grad).copy() for p in model.parameters()]
    optimizer.step()
    optimizer.zero_grad()
    loss(kind, model, 2).backward()
    out = seen + [host(p.data).copy() for p in model.parameters()] + \
        [host(p.grad).copy() for p in model.parameters()]
    assert all(np.isfinite(a.astype(np.float64)).all() for a in out)
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float16], ids=["float64", "fp16"])
@pytest.mark.parametrize("kind, mode", [("gpt", "full"), ("tied", "full"), ("lstm", "full"),
                                        ("mlp", "full"), ("gpt", "selective"),
                                        ("tied", "selective")])
def test_recomputing_equals_keeping_bit_for_bit(kind, mode, dtype):
    kept, rebuilt = trained(kind, dtype, "none"), trained(kind, dtype, mode)
    assert len(kept) == len(rebuilt) > 0
    for a, b in zip(kept, rebuilt):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_the_check_above_can_fail():
    """Another dropout stream gives other gradients: the masks matter to the comparison."""
    model = make("gpt", np.float64)
    nn.set_dropout_generator(model, DeviceRandom(4))
    loss("gpt", model, 0).backward()
    other = [host(p.grad) for p in model.parameters()]
    assert any(a.tobytes() != b.tobytes() for a, b in zip(other, trained("gpt", np.float64,
                                                                           "none")))


def test_recomputing_holds_less_and_evaluating_records_nothing():
    model = nn.GPT(32, 64, 64, 4, 4, np.random.default_rng(0), dropout=0.1)
    nn.set_dropout_generator(model, DeviceRandom(3))
    ids = on_device(np.random.default_rng(1).integers(0, 32, (16, 65)))

    def peak():
        nn.lm_loss(model, ids).backward()  # warm: the caches and masks exist
        with peak_bytes() as seen:
            nn.lm_loss(model, ids).backward()
        return seen.bytes

    kept = peak()
    again(model, "selective")
    selective = peak()
    again(model, "full")
    assert peak() < 0.7 * kept and selective < 0.9 * kept
    with no_grad():
        assert nn.lm_loss(model, ids)._ctx is None
