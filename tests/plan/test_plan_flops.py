"""The FLOP formulas equal the products the engine really computes: every matrix product of a
forward and a backward counted as the autograd runs it, for each model."""

from types import SimpleNamespace

import numpy as np
import pytest
from device_helpers import on_device

from scratchpar import nn
from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.autograd.ops_math import MatMul
from scratchpar.autograd.ops_nn import Linear
from scratchpar.autograd.ops_shape import Permute
from scratchpar.autograd.tensor import Context
from scratchpar.nn.recompute import chosen, recompute
from scratchpar.plan import flops


def is_weight(parent) -> bool:
    """Whether an operand is a parameter, seen through a transpose too (a tied head)."""
    while isinstance(parent, Context) and parent.fn is Permute:
        (parent,) = parent.parents
    return isinstance(parent, Tensor)


@pytest.fixture
def counted(monkeypatch):
    """FLOP of every product the autograd runs: 2·(output elements)·K forward, and that again
    for each operand whose gradient backward computes; of those, the parameters' apart."""
    total = {"forward": 0, "backward": 0, "weight": 0}
    for fn in (MatMul, Linear):
        forward, backward = fn.forward, fn.backward

        def counting_forward(ctx, a, b, *rest, _forward=forward):
            out = _forward(ctx, a, b, *rest)
            ctx.flop = 2 * out.size * a.shape[-1]
            total["forward"] += ctx.flop
            return out

        def counting_backward(ctx, g, _backward=backward):
            total["backward"] += ctx.flop * sum(ctx.needs_input_grad[:2])
            total["weight"] += ctx.flop * sum(needs and is_weight(parent) for needs, parent
                                              in zip(ctx.needs_input_grad[:2], ctx.parents))
            return _backward(ctx, g)

        monkeypatch.setattr(fn, "forward", staticmethod(counting_forward))
        monkeypatch.setattr(fn, "backward", staticmethod(counting_backward))
    return total


def run(model, batch, rows: int, counted) -> flops.Work:
    """The counted work per row of one forward and backward of ``model`` on ``batch``."""
    loss = (nn.lm_loss(model, batch) if batch.dtype.kind == "i" else
            F.cross_entropy(model(batch), on_device(np.zeros(len(batch), dtype=np.int64))))
    loss.backward()
    return flops.Work(counted["forward"] // rows, counted["backward"] // rows,
                      counted["weight"] // rows)


@pytest.mark.parametrize("tied", [False, True])
def test_a_gpt_does_the_work_its_formula_says(counted, tied):
    v, t, c, layers, rows = 13, 9, 8, 3, 4
    model = nn.GPT(v, t, c, 2, layers, np.random.default_rng(0), tie_embeddings=tied)
    ids = on_device(np.random.default_rng(1).integers(1, v, (rows, t + 1)))
    assert run(model, ids, rows, counted) == flops.gpt(v, t, c, layers)


def test_a_grouped_query_gpt_with_its_own_feed_forward_does_the_work_counted_by_hand(counted):
    """H 6 query heads of d 2 over G 2 key/value heads (K = G·d = 4 wide) and an MLP F 20 wide:
    only the fused Q, K, V product and the MLP change; QKᵀ and AV still run every query head."""
    from scratchpar.train import load_config

    v, t, c, heads, groups, wide, layers, rows = 13, 9, 12, 6, 2, 20, 2, 3
    model = nn.GPT(v, t, c, heads, layers, np.random.default_rng(0), kv_heads=groups,
                   d_ff=wide)
    ids = on_device(np.random.default_rng(1).integers(1, v, (rows, t + 1)))
    work = flops.gpt(v, t, c, layers, kv=4, wide=wide)
    assert run(model, ids, rows, counted) == work
    qkv = 2 * 9 * 12 * (6 + 2 * 2) * 2  # 2·T·C·(H + 2G)·d
    proj, mlp, core = 2 * 9 * 12 * 12, 2 * 2 * 9 * 12 * 20, 4 * 9 * 9 * 12  # 2TC², 4TCF, 4T²C
    head = 2 * 9 * 12 * 13
    forward = layers * (qkv + proj + mlp + core) + head
    assert work == flops.Work(forward, 2 * forward, layers * (qkv + proj + mlp) + head)
    cfg = load_config(["--d-model", "12", "--n-heads", "6", "--kv-heads", "2", "--d-ff", "20",
                       "--n-layers", "2", "--seq-len", "9"])
    assert flops.of(cfg, v) == work


@pytest.mark.parametrize("cls, gates", [(nn.LSTMLanguageModel, 4), (nn.RNNLanguageModel, 1)])
def test_a_recurrent_model_does_the_work_its_formula_says(counted, cls, gates):
    v, t, e, h, layers, rows = 11, 6, 5, 7, 2, 3
    model = cls(v, e, h, np.random.default_rng(0), n_layers=layers)
    ids = on_device(np.random.default_rng(1).integers(1, v, (rows, t + 1)))
    assert run(model, ids, rows, counted) == flops.recurrent(v, t, e, h, layers, gates)


def test_an_mlp_does_the_work_its_formula_says(counted):
    sizes, rows = [12, 16, 8, 5], 7
    model = nn.MLP(sizes, np.random.default_rng(0))
    x = on_device(np.random.default_rng(1).standard_normal((rows, sizes[0])).astype(np.float32))
    assert run(model, x, rows, counted) == flops.mlp(sizes)


def test_the_work_of_a_run_s_config_and_of_a_gathering_model():
    from scratchpar.train import load_config

    cfg = load_config(["--d-model", "64", "--n-layers", "2", "--seq-len", "64"])
    work = flops.of(cfg, 32)
    assert work == flops.gpt(32, 64, 64, 2) and work.step == 3 * work.forward
    assert work.forward == 2 * (24 * 64 * 64 * 64 + 4 * 64 * 64 * 64) + 2 * 64 * 64 * 32
    with pytest.raises(ValueError, match="model logreg does its work in gathers"):
        flops.of(load_config(["--source", "sparse-logreg"]), 0)


@pytest.mark.parametrize("mode", ["full", "selective"])
def test_recomputation_adds_to_backward_the_forward_work_it_runs_again(counted, mode):
    """Counted on the model itself, the products that ``--recompute`` runs again in backward
    (a marked layer's forward, each attention core's QKᵀ and AV) are what the formula adds to
    the backward: all of it, under full, but the last layer's (a pipeline re-materializes
    that too)."""
    v, t, c, layers, rows = 13, 9, 8, 3, 4
    model = nn.GPT(v, t, c, 2, layers, np.random.default_rng(0))
    recompute(chosen(model, mode))
    ids = on_device(np.random.default_rng(1).integers(1, v, (rows, t + 1)))
    got, plain = run(model, ids, rows, counted), flops.gpt(v, t, c, layers)

    def formula(strategy: str) -> flops.Work:
        cfg = SimpleNamespace(train=SimpleNamespace(recompute=mode, strategy=strategy),
                              model=SimpleNamespace(kind="gpt", d_model=c),
                              data=SimpleNamespace(seq_len=t))
        return flops.total(flops.recomputed(flops.gpt_layers(v, t, c, layers), cfg))

    want = formula("dp")
    assert got.forward - plain.forward == want.backward - plain.backward > 0  # the reruns
    assert (got.backward, want.forward) == (plain.backward, plain.forward)
    head = 2 * t * c * v
    assert formula("pipeline").backward == want.backward + head * (mode == "full")
