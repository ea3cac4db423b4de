"""Each fused kernel, compiled for the CPU (``host.py``: a block one thread, the blocks in
turn), against the plain ops it stands for, in float64, fp32 and fp16: layer norm, attention's
weights and softmax cross-entropy each way, GELU each way, dropout's mask bit for bit, and
Adam's and AdamW's update of every parameter in one launch (with mixed precision's masters)
bit for bit. The GPU's tree of 256 threads is left to ``--device cuda``
(tests/autograd/test_autograd_fused.py)."""

import types

import numpy as np
import pytest
from host import COMPILER, block_kernel, pointwise

from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.device_rng import DeviceRandom
from scratchpar.kernels import adam_many, cross_entropy, dropout, gelu, layer_norm, softmax
from scratchpar.optim import Adam, AdamW
from scratchpar.optim.mixed import MixedPrecision
from scratchpar.optim.scaler import LossScaler

pytestmark = pytest.mark.skipif(COMPILER is None, reason="no C++ compiler on this machine")
CTYPES = {np.float64: "double", np.float32: "float", np.float16: "__half"}  # a RawModule's T
ELEMENTWISE = {**CTYPES, np.float16: "float16"}  # an elementwise kernel's T (CuPy's float16)
TOLERANCE = {np.float64: 1e-13, np.float32: 3e-6, np.float16: 2e-3}  # a sum in another order
DTYPES = pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])


def plain(fn, arrays, seed):
    """fn's output and its inputs' gradients by the plain ops, on NumPy."""
    inputs = [Tensor(a, requires_grad=True) for a in arrays]
    out = fn(*inputs)
    out.backward(seed)
    return out.data, [t.grad for t in inputs]


def close(got, want, dtype):
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(np.float64(got), np.float64(want), rtol=TOLERANCE[dtype],
                               atol=TOLERANCE[dtype])


def acc(dtype):
    return np.float64 if dtype == np.float64 else np.float32


@DTYPES
def test_layer_norm(dtype, tmp_path):
    rng = np.random.default_rng(1)
    x, seed = (rng.normal(size=(6, 10)).astype(dtype) for _ in range(2))
    gamma, beta = rng.normal(1, 0.5, 10).astype(dtype), rng.normal(size=10).astype(dtype)
    want, (gx, ggamma, gbeta) = plain(lambda *t: F.layer_norm(*t), [x, gamma, beta], seed)
    out, xhat, gx_k, gg_k, gb_k = (np.empty_like(a) for a in (x, x, x, gamma, beta))
    rstd = np.empty(6, acc(dtype))
    block_kernel(layer_norm, "forward", CTYPES[dtype], tmp_path)(
        6, x, gamma, beta, out, xhat, rstd, 10, acc(dtype)(1e-5))
    block_kernel(layer_norm, "backward", CTYPES[dtype], tmp_path)(
        6 + 10, seed, xhat, rstd, gamma, gx_k, gg_k, gb_k, 6, 10)  # rows, then a block a column
    for got, exact in ((out, want), (gx_k, gx), (gg_k, ggamma), (gb_k, gbeta)):
        close(got, exact, dtype)


@DTYPES
@pytest.mark.parametrize("masked", [True, False])
def test_attention_weights(dtype, masked, tmp_path):
    rng = np.random.default_rng(2)
    x, seed = (rng.normal(size=(2, 3, 5, 5)).astype(dtype) for _ in range(2))
    hidden = np.triu(np.ones((5, 5), bool), k=1)
    fn = ((lambda s: F.softmax(F.masked_fill(s * 0.7, hidden, float("-inf")), axis=-1))
          if masked else (lambda s: F.softmax(s * 0.7, axis=-1)))
    want, (gx,) = plain(fn, [x], seed)
    y, gx_k = np.empty_like(x), np.empty_like(x)
    block_kernel(softmax, "forward", CTYPES[dtype], tmp_path)(
        30, x, hidden if masked else np.zeros(1, bool), int(masked), y, 5, 5, 0.7)
    block_kernel(softmax, "backward", CTYPES[dtype], tmp_path)(30, seed, y, gx_k, 5, 0.7)
    close(y, want, dtype)
    close(gx_k, gx, dtype)


@DTYPES
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy(dtype, reduction, tmp_path):
    logits = np.random.default_rng(3).normal(size=(6, 7)).astype(dtype)
    targets = np.array([3, -100, 0, 6, 2, -100])
    want, (gx,) = plain(lambda t: F.cross_entropy(t, targets, reduction=reduction), [logits],
                        acc(dtype)(1.5))
    probs, losses, gx_k = np.empty_like(logits), np.empty(6, acc(dtype)), np.empty_like(logits)
    block_kernel(cross_entropy, "forward", CTYPES[dtype], tmp_path)(
        6, logits, targets, -100, probs, losses, 7)
    scale = 1.0 / 4 if reduction == "mean" else 1.0  # four counted targets
    close(acc(dtype)(losses.sum() * scale), want, dtype)
    block_kernel(cross_entropy, "backward", CTYPES[dtype], tmp_path)(
        6, probs, targets, -100, np.array(1.5 * scale, acc(dtype)), gx_k, 7)
    close(gx_k, gx, dtype)


def test_a_target_outside_the_vocabulary_gives_a_nan_loss(tmp_path):
    probs, losses = np.empty((2, 3)), np.empty(2)
    block_kernel(cross_entropy, "forward", "double", tmp_path)(
        2, np.zeros((2, 3)), np.array([1, 3]), -100, probs, losses, 3)
    assert np.isfinite(losses[0]) and np.isnan(losses[1])


@DTYPES
def test_gelu(dtype, tmp_path):
    rng = np.random.default_rng(4)
    a, seed = rng.normal(0, 3, 50).astype(dtype), rng.normal(size=50).astype(dtype)
    want, (ga,) = plain(F.gelu, [a], seed)
    out, sigma, grad = (np.empty_like(a) for _ in range(3))
    pointwise(gelu.FORWARD, ELEMENTWISE[dtype], tmp_path)(50, a, out, sigma)
    pointwise(gelu.BACKWARD, ELEMENTWISE[dtype], tmp_path)(50, seed, a, sigma, grad)
    close(out, want, dtype)
    close(grad, ga, dtype)


@DTYPES
@pytest.mark.parametrize("origin", [0, 2**64 - 20])  # none; a replayed graph's, in memory
def test_dropout_draws_the_stream_s_mask(dtype, origin, tmp_path):
    x = np.random.default_rng(5).normal(size=300).astype(dtype)
    gen = DeviceRandom(9, 2)
    gen.position = 2**64 - 7  # the counter wraps inside the draw
    start = np.uint64((gen.position - origin + 1) % 2**64)  # counted from the origin
    keep = gen.keep(x.shape, 0.3)
    out, kept, grad = np.empty_like(x), np.empty(300, bool), np.empty_like(x)
    pointwise(dropout.FORWARD, ELEMENTWISE[dtype], tmp_path)(
        300, x, gen.key, start, origin, int(np.ceil(0.3 * 2**53)), 1 / 0.7, out, kept)
    pointwise(dropout.BACKWARD, ELEMENTWISE[dtype], tmp_path)(300, x, kept, 1 / 0.7, grad)
    np.testing.assert_array_equal(kept, keep)
    want = F.dropout(Tensor(x), 0.3, types.SimpleNamespace(keep=lambda *_: keep)).data
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(grad, want)  # the same product, of the seed x


def launch_many(update, params, grads, masters, opt, states):
    """``adam_many``'s one launch over every parameter, on the host: its table of addresses."""
    sizes = [p.size for p in params]
    tensor = np.array([k for k, n in enumerate(sizes) for _ in range(0, n, adam_many.CHUNK)],
                      np.int32)
    start = np.array([s for n in sizes for s in range(0, n, adam_many.CHUNK)], np.int64)
    address = [a.ctypes.data for a in params], [g.ctypes.data for g in grads]
    table = [np.array(column, np.int64) for column in (
        *address, [s["exp_avg"].ctypes.data for s in states],
        [s["exp_avg_sq"].ctypes.data for s in states],
        [0 if m is None else m.ctypes.data for m in masters], sizes)]
    (beta1, beta2), steps = opt.betas, [s["step"] for s in states]
    scalars = np.array([opt.lr / (1 - beta1**t) for t in steps]
                       + [np.sqrt(1 - beta2**t) for t in steps])
    l2, decay = opt.decays()
    update(len(tensor), *table, tensor, start, scalars, len(params), adam_many.CHUNK,
           1.0 / getattr(opt, "grad_scale", 1.0), l2, decay, beta1, beta2, opt.eps)


@pytest.mark.parametrize("dtype,mixed", [(np.float64, False), (np.float32, False),
                                         (np.float16, True)])
@pytest.mark.parametrize("make", [lambda p: Adam(p, lr=1e-2, weight_decay=0.1),
                                  lambda p: AdamW(p, lr=1e-2, weight_decay=0.1, betas=(0.8, 0.99))],
                         ids=["adam-l2", "adamw"])
def test_one_launch_updates_every_parameter_as_the_plain_rule(dtype, mixed, make, tmp_path):
    """Three parameters, one over a chunk, stepped by the plain rule (mixed precision's, with a
    loss scale, for fp16) and by one launch of ``adam_many`` on the plain rule's own state as
    it was before each step: the same bits."""
    rng = np.random.default_rng(7)
    shapes = [(5,), (adam_many.CHUNK + 9,), (3, 2)]
    plain_ps = [types.SimpleNamespace(data=rng.normal(size=s).astype(dtype), grad=None)
                for s in shapes]
    params = [p.data.copy() for p in plain_ps]
    opt = make(plain_ps)
    if mixed:
        opt = MixedPrecision(opt, LossScaler(1024.0))
    rule = opt.inner if mixed else opt
    wide = np.float32 if mixed else dtype
    mine = [{"step": 0, "exp_avg": np.zeros(s, wide), "exp_avg_sq": np.zeros(s, wide)}
            for s in shapes]
    masters = [p.astype(np.float32) for p in params] if mixed else [None] * 3
    update = block_kernel(adam_many, "update", (CTYPES[dtype], CTYPES[wide]), tmp_path)
    for _ in range(3):
        grads = [(rng.normal(size=s) * (1024 if mixed else 1)).astype(dtype) for s in shapes]
        for p, g in zip(plain_ps, grads):
            p.grad = g
        for state in mine:
            state["step"] += 1
        launch_many(update, params, grads, masters, _scaled(rule, opt), mine)
        opt.step()
    for k in range(3):
        np.testing.assert_array_equal(params[k], plain_ps[k].data)
        for name in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(mine[k][name], rule.state[k][name])
        if mixed:
            np.testing.assert_array_equal(masters[k], opt.state[k]["master"])


def _scaled(rule, opt):
    """The rule's hyperparameters with the loss scale its optimizer divides by."""
    return types.SimpleNamespace(betas=rule.betas, lr=rule.lr, eps=rule.eps,
                                 decays=rule.decays, grad_scale=opt.grad_scale)
