"""The mixture of experts on one device: routing's priority and capacity by hand, the layer
against its definition written out, its aux losses against their formulas, and the grad-check
oracle through the router, the gates and the dispatch."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from nn_helpers import check_module, perturb

from scratchpar.autograd import Tensor, grad_check
from scratchpar.nn.moe import Experts, MixtureOfExperts
from scratchpar.nn.routing import capacity, route


def layer(spec, seed, c=4):
    gen = np.random.default_rng(seed)
    return perturb(MixtureOfExperts(c, spec, gen, dtype=np.float64),
                   np.random.default_rng(seed + 1))


def test_first_choices_take_their_slots_before_second_choices():
    probs = np.array([[0.6, 0.3, 0.1],   # token 0: experts 0, 1
                      [0.5, 0.1, 0.4],   # token 1: experts 0, 2
                      [0.2, 0.7, 0.1]])  # token 2: experts 1, 0
    r = route(probs, 2, 2)
    assert r.choice.tolist() == [[0, 1], [0, 2], [1, 0]]
    assert r.routed.tolist() == [3, 2, 1]
    # expert 0: tokens 0, 1 by first choice fill its 2 slots; token 2's second choice drops
    assert [rows.tolist() for rows in r.rows] == [[0, 1], [2, 0], [1]]
    assert r.kept == 5 and r.dropped == 1
    assert r.slot.tolist() == [[0, 3], [1, 4], [2, 5]]  # row 5: the zero row


def test_capacity_is_k_t_c_over_e_rounded_up_and_zero_is_dropless():
    assert capacity(10, 2, 4, 1.0) == 5 and capacity(10, 2, 4, 1.25) == 7
    assert capacity(10, 2, 4, 0) is None
    r = route(np.eye(3)[[0, 0, 0, 0]], 1, None)
    assert r.dropped == 0 and r.rows[0].tolist() == [0, 1, 2, 3]


@settings(max_examples=10, deadline=None)
@given(experts=st.integers(1, 4), data=st.data(), factor=st.sampled_from([0, 0.5, 1.0, 2.0]),
       seed=st.integers(0, 2**31))
def test_the_layer_is_its_definition_written_out(experts, data, factor, seed):
    """out_t = Σ_j g_tj · E_{e_tj}(x_t), over the assignments kept, with g the chosen
    probabilities renormalized over the k (k > 1) or as they are (k = 1)."""
    k = data.draw(st.integers(1, experts), label="k")
    moe = layer(Experts(experts, k, factor), seed)
    x = np.random.default_rng(seed + 2).standard_normal((2, 3, 4))
    out = host(moe(Tensor(on_device(x))).data).reshape(6, 4)
    tokens = x.reshape(6, 4)
    logits = tokens @ host(moe.router.weight.data)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    r = route(probs, k, capacity(6, k, experts, factor))
    want = np.zeros((6, 4))
    for t in range(6):
        chosen = probs[t, r.choice[t]]
        gates = chosen / chosen.sum() if k > 1 else chosen
        for j, e in enumerate(r.choice[t]):
            if t in host(r.rows[e]).tolist():
                want[t] += gates[j] * host(moe.experts[e](Tensor(on_device(tokens[t:t + 1]))
                                                            ).data)[0]
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


def test_the_aux_losses_are_their_formulas():
    spec = Experts(4, 2, 0, balance=0.5, z_loss=0.25)
    moe = layer(spec, 3)
    x = np.random.default_rng(5).standard_normal((2, 5, 4))
    moe(Tensor(on_device(x)))
    logits = x.reshape(10, 4) @ host(moe.router.weight.data)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    routed = np.bincount(np.argsort(-probs, -1, kind="stable")[:, :2].reshape(-1), minlength=4)
    balance = 0.5 * 4 * np.sum(routed / 20 * probs.mean(0))  # Fedus et al. 2021, eq. 4
    z = 0.25 * np.mean(np.log(np.exp(logits).sum(-1)) ** 2)  # Zoph et al. 2022, eq. 5
    assert float(host(moe.aux.data)) == pytest.approx(balance + z, rel=1e-12)
    assert moe.stats["load"] == pytest.approx(routed.max() / routed.mean())
    assert moe.stats["dropped"] == 0


@pytest.mark.parametrize("k, factor", [(1, 0), (2, 0), (2, 0.75), (3, 1.0)])
def test_grad_check_through_router_gates_and_dispatch(k, factor):
    moe = layer(Experts(3, k, factor), 7, c=3)
    x = Tensor(on_device(np.random.default_rng(8).standard_normal((4, 3, 3))),
               requires_grad=True)
    moe(x)
    assert all(len(rows) for rows in moe_rows(moe, x)), "an expert without tokens checks less"
    check_module(moe, lambda x: moe(x), [x])
    router = moe.router.weight  # the aux losses reach the router alone, and the input
    grad_check(lambda x, w: (moe(x), moe.aux)[1], [x, router])
    assert router.grad is not None and float(abs(host(router.grad)).sum()) > 0


def moe_rows(moe, x):
    """The tokens each expert computes for input ``x``."""
    logits = host(x.data).reshape(-1, x.shape[-1]) @ host(moe.router.weight.data)
    spec = moe.spec
    return route(logits, spec.top_k, capacity(logits.shape[0], spec.top_k, spec.count,
                                               spec.capacity_factor)).rows


@pytest.mark.parametrize("every", [1, 2])
def test_a_sparse_gpt_adds_its_aux_losses_to_its_task_s_loss_once_per_token(every):
    """Every ``moe_every``-th block is sparse; the Task's summed loss is the tokens' summed
    cross-entropy plus N times the blocks' aux losses, so its mean is CE + aux; and the whole
    sparse GPT passes the grad check."""
    from scratchpar.nn import GPT, lm_loss
    from scratchpar.train.task import Task
    spec = Experts(3, 2, 1.0, balance=0.1, z_loss=0.01)
    model = perturb(GPT(7, 5, 4, 2, 2, np.random.default_rng(0), dtype=np.float64,
                        experts=spec, moe_every=every), np.random.default_rng(1))
    sparse = [i for i, b in enumerate(model.blocks) if isinstance(b.mlp[0], MixtureOfExperts)]
    assert sparse == [i for i in range(2) if (i + 1) % every == 0]
    task = Task(None, model, "tok")
    batch = on_device(np.random.default_rng(2).integers(1, 7, (3, 6)))  # no padding: N = 15
    total = task.loss(model, batch, "sum")
    aux = model.aux_loss()
    ce = lm_loss(model, batch, "sum")
    assert float(total.data) == pytest.approx(float(ce.data) + 15 * float(aux.data), rel=1e-12)
    ids = on_device(np.random.default_rng(3).integers(1, 7, (2, 5)))
    routed = [p for name, p in model.named_parameters()  # each router, an expert's W₁, LN₂
              if "router" in name or "experts.0.0" in name or "ln2" in name]
    grad_check(lambda *params: (model(ids), model.aux_loss())[1] + model(ids).sum() * 0.1,
               routed)
