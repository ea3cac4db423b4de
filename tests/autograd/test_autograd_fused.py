"""The fused ops (``autograd/ops_fused.py``) against the plain ops they stand for, values and
gradients, in float64, fp32 and fp16: bit for bit where they run their plain parents' code (on
NumPy and on the device double), and within a kernel's other order of sums on a GPU
(``--device cuda``, where they launch ``scratchpar/kernels``). Attention's fused weights, whose
plain form is three ops, are grad-checked as well."""

import numpy as np
import pytest
from device_helpers import host, on_device

from scratchpar import backend, kernels
from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.autograd.grad_check import grad_check
from scratchpar.device_rng import DeviceRandom
from scratchpar.nn import GPT, set_dropout_generator
from scratchpar.nn.loss import lm_loss

# a kernel sums a row in another order than NumPy: a few units of the dtype's roundoff on a GPU
TOLERANCE = {np.float64: 1e-12, np.float32: 2e-5, np.float16: 4e-3}
DTYPES = (np.float64, np.float32, np.float16)


def run(mode: str, fn, arrays, seed_grad, dtype):
    """fn's output and every input's gradient, with the fused ops ``mode`` (as NumPy arrays)."""
    with kernels.using(mode):
        inputs = [Tensor(on_device(a, dtype), requires_grad=True) for a in arrays]
        out = fn(*inputs)
        out.backward(on_device(seed_grad, dtype))
        return [host(out.data)] + [host(t.grad) for t in inputs]


def assert_alike(fused, plain, dtype):
    for got, want in zip(fused, plain):
        assert got.dtype == want.dtype
        if backend.device() == "cuda":
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])
        else:
            np.testing.assert_array_equal(got, want)


def causal(t: int):
    return on_device(np.triu(np.ones((t, t), bool), k=1))


CASES = {
    "layer norm": (lambda x, g, b: F.layer_norm(x, g, b), [(2, 5, 24), (24,), (24,)]),
    "gelu": (F.gelu, [(3, 7, 10)]),
    "attention weights": (lambda s: _weights(s, causal(6)), [(2, 3, 6, 6)]),
    "cross-entropy": (lambda x: F.cross_entropy(x, TARGETS()), [(6, 7)]),
    "cross-entropy, summed": (lambda x: F.cross_entropy(x, TARGETS(), reduction="sum"), [(6, 7)]),
}


def TARGETS():  # noqa: N802 - a constant, made on the test's device
    return on_device(np.array([3, -100, 0, 6, 2, -100]))


def _weights(scores, hidden):
    """Attention's weights as attention forms them: one fused op, or the plain three."""
    if kernels.fused(scores.data):
        return F.scaled_masked_softmax(scores, 0.5, hidden)
    return F.softmax(F.masked_fill(scores * 0.5, hidden, float("-inf")), axis=-1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_fused_op_equals_its_plain_ops(case, dtype, device):
    fn, shapes = CASES[case]
    rng = np.random.default_rng(3)
    arrays = [rng.normal(1.0 if len(s) == 1 else 0.0, 1.0, s) for s in shapes]  # γ near 1
    seed = rng.normal(size=np.shape(host(fn(*[Tensor(on_device(a)) for a in arrays]).data)))
    assert_alike(run("on", fn, arrays, seed, dtype), run("off", fn, arrays, seed, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_dropout_draws_the_plain_op_s_mask_and_moves_the_stream_alike(dtype, device):
    x = np.random.default_rng(4).normal(size=(4, 9, 16))
    seed = np.random.default_rng(5).normal(size=x.shape)
    results = {}
    for mode in ("off", "on"):
        gen = DeviceRandom(7, 1)
        gen.position = 2**64 - 100  # the counter wraps inside this draw
        results[mode] = run(mode, lambda t, g=gen: F.dropout(t, 0.3, g), [x], seed, dtype)
        results[mode].append(gen.position)
    assert results["on"].pop() == results["off"].pop() == 2**64 - 100 + x.size
    for got, want in zip(results["on"], results["off"]):
        np.testing.assert_array_equal(got, want)  # a mask, and products by one scale: exact


def test_attention_s_fused_weights_are_differentiable_in_float64(device):
    scores = Tensor(on_device(np.random.default_rng(6).normal(size=(2, 2, 5, 5))),
                    requires_grad=True)
    grad_check(lambda s: F.scaled_masked_softmax(s, 0.7, causal(5)), [scores])  # raises if not


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_a_gpt_step_with_the_fused_ops_equals_the_plain_step(kv_heads, device):
    """A GPT with dropout (every fused op in it, grouped-query attention or not): its loss and
    every parameter's gradient, in float64."""
    batch = on_device(np.random.default_rng(8).integers(0, 11, (3, 9)))
    results = {}
    for mode in ("off", "on"):
        with kernels.using(mode):
            model = GPT(11, 8, 16, 4, 2, np.random.default_rng(9), dropout=0.2,
                        dtype=np.float64, kv_heads=kv_heads)
            set_dropout_generator(model, DeviceRandom(0, 1))
            loss = lm_loss(model, batch, reduction="sum")
            loss.backward()
            results[mode] = [host(loss.data)] + [host(p.grad) for p in model.parameters()]
    assert_alike(results["on"], results["off"], np.float64)


def test_the_switch_names_its_modes():
    with pytest.raises(kernels.KernelError, match="off, gpu, on"):
        kernels.use("yes")
    assert kernels.use(kernels.use("gpu")) == "gpu"
    before = kernels.mode()  # the environment's (the lease runs these under gpu)
    with kernels.using("on"):
        assert kernels.mode() == "on"
    assert kernels.mode() == before


def test_a_bad_switch_in_the_environment_is_a_bad_input_of_the_training_command(
        monkeypatch, capsys):
    from scratchpar.train.__main__ import main

    monkeypatch.setenv("SCRATCHPAR_FUSED", "yes")
    monkeypatch.setattr(kernels, "_using", None)  # read again, as a new process would
    assert main(["--steps", "1"]) == 2
    assert "SCRATCHPAR_FUSED must be one of off, gpu, on; got 'yes'" in capsys.readouterr().err
