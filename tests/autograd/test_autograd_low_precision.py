"""Every op in fp16 and bf16 against float64 on the same inputs: each output and gradient within
the roundings its 16-bit arrays allow, in the input's dtype (a loss in fp32).

The error model: rounding to a 16-bit format moves a value by at most u of itself, the unit
roundoff (fp16 u = 2⁻¹¹, 10 stored mantissa bits; bf16 u = 2⁻⁸, 7 bits). The inputs are exact in
both runs (16-bit values upcast), so the difference comes from the roundings the 16-bit run
makes: its output's, and those of the 16-bit arrays an op saves for backward or computes
between its steps. An op whose result passes through r roundings, each entering it with a
factor of about 1 (the inputs are drawn where the op is well conditioned), is within r·u of
float64, norm-wise: ‖got − exact‖₂ ≤ r·u·‖exact‖₂. A result rounded once (r = 1) is held to
that elementwise too: |got − exact| ≤ u·|exact|, which a second rounding breaks somewhere among
hundreds of entries. fp32 arithmetic inside adds about 2⁻²⁴ a step, 2¹³ times less than fp16's
u, which the margins cover (``SLACK``, and ``FLOOR`` where a sum cancels). An op computed in 16
bits step by step, or a sum added in 16 bits, exceeds these bounds.
"""

import numpy as np
import pytest
from device_helpers import host, on_device

from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.autograd.precision import WIDE
from scratchpar.backend import xp_default
from scratchpar.device_rng import DeviceRandom

UNIT = {"fp16": 2.0**-11, "bf16": 2.0**-8}  # u: half the spacing of the format's numbers at 1
SLACK = 1.05  # fp32 arithmetic inside, and the norm of a few subnormal fp16 results
FP32 = 2.0**-20  # a loss computed in fp32 from exact inputs: 2⁻²⁴ a step, a few dozen steps
FLOOR = 2.0**-16  # of the largest |exact|: fp32's error where a sum of ≤ 64 terms cancels
SUBNORMAL = {"fp16": 2.0**-25, "bf16": 2.0**-134}  # half the spacing of the format's subnormals


def relative_error(got, exact) -> float:
    got, exact = host(got).astype(np.float64), host(exact)
    return float(np.linalg.norm(got - exact) / np.linalg.norm(exact))


def within(got, exact, r: int, fmt: str, what: str) -> None:
    """``got`` within r roundings of ``exact`` norm-wise, and elementwise if r = 1."""
    u = UNIT[fmt]
    err = relative_error(got, exact)
    assert err <= r * u * SLACK, f"{what}: off by {err / u:.2f} u norm-wise, allowed {r} u"
    if r == 1:
        got, exact = host(got).astype(np.float64), host(exact)
        bound = u * np.abs(exact) + FLOOR * u * np.abs(exact).max() + SUBNORMAL[fmt]
        worst = np.max(np.abs(got - exact) / bound)
        assert worst <= 1, f"{what}: an entry is off by {worst:.2f} of one rounding"


def run_both(fn, inputs, dtype, seed_rng):
    """``fn`` on leaves of ``inputs`` (host arrays) rounded to ``dtype``, and on the same values
    in float64; each backward from one seed, drawn in the 16-bit output's dtype. Returns the
    16-bit and float64 outputs and leaves."""
    rounded = [np.asarray(x).astype(dtype) for x in inputs]
    low = [Tensor(on_device(x), requires_grad=True) for x in rounded]
    exact = [Tensor(on_device(x.astype(np.float64)), requires_grad=True) for x in rounded]
    out, ref = fn(*low), fn(*exact)
    seed = np.asarray(seed_rng.standard_normal(out.shape)).astype(out.dtype)
    out.backward(on_device(seed))
    ref.backward(on_device(seed.astype(np.float64)))
    return out, ref, low, exact


def labels(n, v, rng):
    y = rng.integers(0, v, size=n)
    y[::5] = -100  # some targets ignored
    return y


# name: (fn, input shapes (drawn N(0, 1)), r of the output, r of each input's gradient).
# r counts the 16-bit roundings on the way to each result (see the module docstring).
OPS = {
    # one product of exact inputs accumulated in fp32, rounded once; so is each gradient
    "matmul": (lambda a, b: a @ b, [(2, 3, 8, 16), (2, 3, 16, 8)], 1, (1, 1)),
    "matmul_weight": (lambda a, w: a @ w, [(2, 8, 16), (16, 8)], 1, (1, 1)),
    # the bias added to the fp32 product before the one rounding; its gradient a sum in fp32
    "linear": (lambda x, w, b: F.linear(x, w, b), [(2, 8, 16), (16, 12), (12,)], 1, (1, 1, 1)),
    # fp32 inside, rounded once; backward reads the saved 16-bit y in y ⊙ (g − Σ g⊙y): its
    # rounding enters twice, the output's once
    "softmax": (lambda x: F.softmax(x, axis=-1), [(16, 24)], 1, (3,)),
    # saved in fp32: only the output's rounding
    "log_softmax": (lambda x: F.log_softmax(x, axis=0), [(16, 24)], 1, (1,)),
    # x̂ saved in 16 bits enters dx twice (x̂ and x̂·mean(ĝ⊙x̂)) and dγ once
    "layer_norm": (lambda x, g, b: F.layer_norm(x, g, b), [(16, 24), (24,), (24,)], 1, (3, 2, 1)),
    # added in fp32 and rounded once; the gradient spreads g untouched, or divides it once
    "sum": (lambda x: F.sum(x, axis=0), [(64, 24)], 1, (0,)),
    "mean": (lambda x: F.mean(x, axis=1, keepdims=True), [(24, 64)], 1, (1,)),
    "max": (lambda x: F.max(x, axis=1), [(16, 24)], 0, (0,)),
    # several steps in fp32, rounded once. Backward reads the saved 16-bit y (σ for GELU),
    # computes in fp32 and rounds once; y's rounding enters 1 − y² (tanh) and y(1 − y)
    # (sigmoid) with factors 2y²/(1 − y²) and |1 − 2y|/(1 − y), large only where the gradient
    # is small: about 1 norm-wise on N(0, 1) inputs. Budget: 3
    "sigmoid": (F.sigmoid, [(16, 24)], 1, (3,)),
    "tanh": (F.tanh, [(16, 24)], 1, (3,)),
    "gelu": (F.gelu, [(16, 24)], 1, (3,)),
    "relu": (F.relu, [(16, 24)], 0, (0,)),
    "dropout": (lambda x: F.dropout(x, 0.3, DeviceRandom(5)), [(16, 24)], 1, (1,)),
    # one 16-bit ufunc, rounded once; its gradient g·eˣ reads the saved output: 2
    "exp": (F.exp, [(16, 24)], 1, (2,)),
    # a·b and its sum with ½a (exact) each rounded, a little cancellation between them: 3;
    # a's gradient g·b + ½g likewise; b's, rounded products added in fp32 and rounded: 2
    "mul_add": (lambda a, b: a * b + 0.5 * a, [(16, 24), (24,)], 3, (3, 2)),
    # lookups and fills move values untouched; repeated rows and picks are added in fp32
    "gather": (lambda w: F.gather(w, on_device(np.array([[0, 3, 3], [3, 1, 0]]))), [(5, 8)], 0,
               (1,)),
    "getitem": (lambda x: x[on_device(np.array([0, 2, 2, 2, 5]))], [(6, 8)], 0, (1,)),
    "masked_fill": (lambda x: F.masked_fill(x, x.data > 0.5, -4.0), [(16, 24)], 0, (0,)),
    "where": (lambda x: F.where(x.data > 0, x, 0.0), [(16, 24)], 0, (0,)),
    "wide": (F.wide, [(16, 24)], 0, (1,)),
}


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("seed", [0, 1])
def test_each_op_within_its_roundings_of_float64(name, seed, low):
    fmt, dtype = low
    fn, shapes, r_out, r_grads = OPS[name]
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(shape) for shape in shapes]
    if name in ("sum", "mean"):  # positive: the fp32 sum is not a cancellation
        inputs = [np.abs(x) + 0.5 for x in inputs]
    if name == "max":  # a unique maximum a row
        inputs = [0.1 * rng.permutation(inputs[0].size).reshape(shapes[0])]
    out, ref, leaves, exact = run_both(fn, inputs, dtype, rng)
    if name == "linear" and xp_default() is not np:
        r_out = 2  # a native product (cuBLAS's, the double's) is rounded before the bias is added
    expected = WIDE if name == "wide" else dtype
    assert out.dtype == expected, f"{name}: output in {out.dtype}, not {expected}"
    within(out.data, ref.data, r_out, fmt, f"{name}'s output")
    for i, (leaf, r) in enumerate(zip(leaves, r_grads)):
        assert leaf.grad.dtype == dtype, f"{name}: gradient {i} in {leaf.grad.dtype}"
        within(leaf.grad, exact[i].grad, r, fmt, f"{name}'s gradient {i}")


@pytest.mark.parametrize("loss", ["cross_entropy", "bce"])
def test_losses_are_fp32_and_their_gradients_in_the_logits_dtype(loss, low):
    """The loss from exact inputs in fp32 arithmetic: within 2⁻²⁰, where a 16-bit loss would be
    off by up to u. The gradient reads the saved 16-bit softmax (or σ − y) and is rounded once:
    2 roundings."""
    fmt, dtype = low
    u = UNIT[fmt]
    rng = np.random.default_rng(3)
    if loss == "cross_entropy":
        y = on_device(labels(40, 10, rng))
        fn, shape = (lambda z: F.cross_entropy(z, y)), (40, 10)
    else:
        y = on_device((rng.random(40) > 0.5).astype(np.float64))
        fn, shape = (lambda z: F.binary_cross_entropy_with_logits(z, y)), (40,)
    out, ref, (leaf,), (exact,) = run_both(fn, [2 * rng.standard_normal(shape)], dtype, rng)
    assert out.dtype == np.float32 and leaf.grad.dtype == dtype
    assert relative_error(out.data, ref.data) <= FP32
    assert relative_error(leaf.grad, exact.grad) <= 2 * u * SLACK


def test_long_sums_are_added_in_fp32(low):
    """8,192 values in [0.5, 1): NumPy adds them in 16 bits to 2,048 (fp16) or 256 (bf16). Every
    path that sums a 16-bit array (Sum, Mean, a broadcast's and a bias's gradient, an
    embedding row that many tokens share) is within one rounding of the exact sum."""
    fmt, dtype = low
    u = UNIT[fmt]
    n = 8192
    x = np.random.default_rng(4).uniform(0.5, 1.0, size=(n, 1)).astype(dtype)
    exact = x.astype(np.float64).sum()
    t = Tensor(on_device(x), requires_grad=True)
    assert relative_error(F.sum(t).data, exact) <= u * SLACK
    assert relative_error(F.mean(t).data, exact / n) <= u * SLACK
    bias = Tensor(on_device(np.zeros(1, dtype)), requires_grad=True)
    (t + bias).backward(on_device(x))  # the bias's gradient: Σ over the broadcast rows
    assert relative_error(bias.grad, [exact]) <= u * SLACK
    w, b = (Tensor(on_device(np.ones(s, dtype)), requires_grad=True) for s in ((1, 1), (1,)))
    F.linear(Tensor(on_device(x)), w, b).backward(on_device(x))
    assert relative_error(b.grad, [exact]) <= u * SLACK
    table = Tensor(on_device(np.zeros((2, 1), dtype)), requires_grad=True)
    F.gather(table, on_device(np.zeros(n, dtype=np.int64))).backward(on_device(x))
    assert relative_error(table.grad[0], [exact]) <= u * SLACK


@pytest.mark.parametrize("scale", [20.0, 100.0])
def test_large_logits_stay_finite(scale, low):
    """Logits of 20 to 100·N(0, 1), where e^x overflows fp16 (past x ≈ 11) and the sum of 2,048
    losses of hundreds of nats overflows it too: softmax, log-softmax and the cross-entropy stay
    finite and close to float64."""
    fmt, dtype = low
    u = UNIT[fmt]
    rng = np.random.default_rng(5)
    z = scale * rng.standard_normal((2048, 8))
    y = on_device(labels(2048, 8, rng))
    with np.errstate(over="raise", invalid="raise"):
        for fn in (F.softmax, F.log_softmax, lambda t: F.cross_entropy(t, y)):
            out, ref, (leaf,), (exact,) = run_both(fn, [z], dtype, rng)
            assert np.isfinite(host(out.data)).all() and np.isfinite(host(leaf.grad)).all()
            assert relative_error(out.data, ref.data) <= u * SLACK


def test_a_loss_scale_of_2_16_as_seed_does_not_overflow(low):
    """fp16's loss scale S = 2¹⁶ as backward's seed: the fp32 loss takes it, and the logits'
    gradient is S times the unscaled one (within its 2 roundings), finite."""
    fmt, dtype = low
    u = UNIT[fmt]
    rng = np.random.default_rng(6)
    z = rng.standard_normal((64, 10)).astype(dtype)
    y = on_device(labels(64, 10, rng))
    grads = []
    for seed in (1.0, 2.0**16):
        leaf = Tensor(on_device(z), requires_grad=True)
        F.cross_entropy(leaf, y).backward(on_device(np.asarray(seed, np.float32)))
        grads.append(host(leaf.grad).astype(np.float64))
    assert np.isfinite(grads[1]).all()
    assert relative_error(grads[1] / 2.0**16, grads[0]) <= 2 * u * SLACK


@pytest.mark.parametrize("fill", [float("-inf"), -1e9])
def test_a_causal_mask_in_16_bits(fill, low):
    """A masked fill of −inf, or of −1e9 (beyond fp16's 65,504: the format's most negative
    finite value instead), then softmax: the future gets exactly 0, each row sums to 1, no
    overflow is raised, and a row masked whole (possible with a finite fill) is uniform."""
    fmt, dtype = low
    u = UNIT[fmt]
    rng = np.random.default_rng(8)
    future = on_device(np.triu(np.ones((6, 6), dtype=bool), k=1))
    x = Tensor(on_device(rng.standard_normal((2, 6, 6)).astype(dtype)), requires_grad=True)
    with np.errstate(over="raise", invalid="raise"):
        probs = F.softmax(F.masked_fill(x, future, fill), axis=-1)
        probs.backward(on_device(rng.standard_normal((2, 6, 6)).astype(dtype)))
    p = host(probs.data).astype(np.float64)
    assert probs.dtype == dtype and (p[:, host(future)] == 0).all()
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=u * SLACK)  # each p rounded by ≤ u·p
    assert (host(x.grad)[:, host(future)] == 0).all()
    if np.isfinite(fill):
        whole = F.softmax(F.masked_fill(Tensor(on_device(np.zeros((1, 4), dtype))),
                                        on_device(np.ones((1, 4), dtype=bool)), fill), axis=-1)
        np.testing.assert_array_equal(host(whole.data).astype(np.float64), 0.25)


def test_python_constants_keep_a_16_bit_dtype(low):
    """bf16 · 0.5 is fp32 in NumPy (ml_dtypes' bfloat16 is outside NEP 50's weak-scalar rule);
    the ops give a Python float the tensor's dtype, as NumPy does for fp16."""
    _, dtype = low
    t = Tensor(on_device(np.linspace(0.5, 2.0, 6).astype(dtype)), requires_grad=True)
    outs = [t * 0.5, 0.5 * t, t + 1.5, 1.5 - t, t / 3.0, 3.0 / t, t**2.0,
            F.where(t.data > 1, t, 0.0), F.dropout(t, 0.5, DeviceRandom(0))]
    assert [o.dtype for o in outs] == [dtype] * len(outs)
    sum(outs[1:], outs[0]).sum().backward()
    assert t.grad.dtype == dtype


def test_wide_data_meets_16_bit_weights_in_their_dtype(low):
    """A batch's fp32 features into a 16-bit layer: the layer rounds them, as a tensor core
    reads its operands, so that its output and its weights' gradients stay 16-bit; the
    features' own gradient comes back in fp32."""
    _, dtype = low
    gen = np.random.default_rng(4)
    x = Tensor(on_device(gen.standard_normal((6, 5)), np.float32), requires_grad=True)
    w = Tensor(on_device(gen.standard_normal((5, 3)), dtype), requires_grad=True)
    b = Tensor(on_device(gen.standard_normal(3), dtype), requires_grad=True)
    y = F.linear(x, w, b)
    F.sum(y).backward()
    assert (y.dtype, w.grad.dtype, b.grad.dtype, x.grad.dtype) == (dtype, dtype, dtype,
                                                                    np.float32)
    rounded = host(x.data).astype(dtype).astype(np.float64)  # (6, 5)
    exact = rounded @ host(w.data).astype(np.float64) + host(b.data).astype(np.float64)
    np.testing.assert_allclose(host(y.data).astype(np.float64), exact, rtol=2.0**-7, atol=1e-2)
