"""The mixture of experts on one device: routing's priority and capacity by hand, the layer
against its definition written out, its aux losses against their formulas, and the grad-check
oracle through the router, the gates and the dispatch."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from nn_helpers import perturb

from scratchpar.autograd import Tensor
from scratchpar.autograd.grad_check import numerical_grad
from scratchpar.nn.moe import Experts, MixtureOfExperts
from scratchpar.nn.routing import Share, capacity, count, route, segments_of, tally


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


def test_the_aux_losses_are_their_formulas_and_ride_the_output_s_backward():
    """The figures are Switch's and ST-MoE's formulas; the carried term is N times them, so
    backward from the output's zero gradient gives the router their gradient times N."""
    spec = Experts(4, 2, 0, balance=0.5, z_loss=0.25)
    moe = layer(spec, 3)
    x = np.random.default_rng(5).standard_normal((2, 5, 4))
    out = moe(Tensor(on_device(x)))
    logits = x.reshape(10, 4) @ host(moe.router.weight.data)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    routed = np.bincount(np.argsort(-probs, -1, kind="stable")[:, :2].reshape(-1), minlength=4)
    balance = 0.5 * 4 * np.sum(routed / 20 * probs.mean(0))  # Fedus et al. 2021, eq. 4
    z = 0.25 * np.mean(np.log(np.exp(logits).sum(-1)) ** 2)  # Zoph et al. 2022, eq. 5
    assert moe.stats["balance_loss"] == pytest.approx(balance, rel=1e-12)
    assert moe.stats["z_loss"] == pytest.approx(z, rel=1e-12)
    assert moe.stats["load"] == pytest.approx(routed.max() / routed.mean())
    assert moe.stats["dropped"] == 0
    (out * 0).sum().backward()  # the output's gradient 0: the aux terms alone reach the router
    w = host(moe.router.weight.data)

    def aux(w):  # the carried term: N·(balance + z), f held constant
        lg = x.reshape(10, 4) @ w
        p = np.exp(lg) / np.exp(lg).sum(-1, keepdims=True)
        return 0.5 * 4 * np.sum(routed / 20 * p.sum(0)) + 0.25 * np.sum(
            np.log(np.exp(lg).sum(-1)) ** 2)

    numeric = np.zeros_like(w)
    for i in np.ndindex(*w.shape):
        step = np.zeros_like(w)
        step[i] = 1e-6
        numeric[i] = (aux(w + step) - aux(w - step)) / 2e-6
    np.testing.assert_allclose(host(moe.router.weight.grad), numeric, rtol=1e-6, atol=1e-9)


@settings(max_examples=20, deadline=None)
@given(experts=st.integers(1, 5), data=st.data(), factor=st.sampled_from([0, 0.5, 1.0, 1.5]),
       seed=st.integers(0, 2**31), cut=st.lists(st.integers(1, 11), max_size=4, unique=True))
def test_a_tally_of_shares_places_and_drops_as_one_device(experts, data, factor, seed, cut):
    """Tokens dealt out to ranks as any runs of a micro-batch, each rank routing its own with
    the tally of every rank's share, keep exactly the assignments one device keeps."""
    k = data.draw(st.integers(1, experts), label="k")
    spec = Experts(experts, k, factor)
    probs = np.random.default_rng(seed).dirichlet(np.ones(experts), 12)  # (12, E)
    alone = route(probs, k, capacity(12, k, experts, factor))
    bounds = [0, *sorted(cut), 12]
    runs = [np.arange(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    owners = np.random.default_rng(seed + 1).integers(0, 3, len(runs))  # 3 ranks, any runs
    held = [np.concatenate([r for r, o in zip(runs, owners) if o == rank] or [np.zeros(0, int)])
            for rank in range(3)]
    choice = [np.argsort(-probs[h], -1, kind="stable")[:, :k] for h in held]
    segments = [segments_of(h) if len(h) else np.zeros(1, np.int64) for h in held]
    shares = [Share(h[s[:-1]], count(c, experts, s), probs[h].sum(0), 0.0, len(h))
              for h, c, s in zip(held, choice, segments)]
    from scratchpar.nn.routing import assign, places
    for rank, h in enumerate(held):
        t = tally(shares, rank, segments[rank], k, spec)
        assert t.stats["dropped"] == alone.dropped
        r = assign(choice[rank], places(choice[rank], experts, segments[rank], t.before),
                   t.slots, experts)
        kept_here = r.slot < r.kept  # (T_r, k)
        kept_alone = alone.slot[h] < alone.kept
        assert (kept_here == kept_alone).all()


@pytest.mark.parametrize("k, factor", [(1, 0), (2, 0), (2, 0.75), (3, 1.0)])
def test_grad_check_through_router_gates_and_dispatch(k, factor):
    moe = layer(Experts(3, k, factor), 7, c=3)
    x = Tensor(on_device(np.random.default_rng(8).standard_normal((4, 3, 3))),
               requires_grad=True)
    moe(x)
    assert all(len(rows) for rows in moe_rows(moe, x)), "an expert without tokens checks less"
    check_carried(lambda: moe(x), [x, *moe.parameters()], [moe])


def check_carried(forward, inputs, layers):
    """Central differences of a fixed random projection of ``forward()``'s output
    plus the ``layers``' carried aux terms, against backward seeded with 1: a carried term
    enters backward with gradient 1, whatever the seed."""
    def objective(*args):
        out = forward()  # of ``inputs``, changed in place
        weights = np.random.default_rng(0).standard_normal(out.shape)
        return (out * Tensor(on_device(weights))).sum() + Tensor(sum(m.aux.data
                                                                      for m in layers))
    for x in inputs:
        x.grad = None
    objective(*inputs).backward()
    numeric = numerical_grad(objective, inputs, 1.0)
    for x, n in zip(inputs, numeric):
        assert x.grad is not None
        np.testing.assert_allclose(host(x.grad), host(n), rtol=1e-5, atol=1e-7)


def moe_rows(moe, x):
    """The tokens each expert computes for input ``x``."""
    logits = host(x.data).reshape(-1, x.shape[-1]) @ host(moe.router.weight.data)
    spec = moe.spec
    return route(logits, spec.top_k, capacity(logits.shape[0], spec.top_k, spec.count,
                                               spec.capacity_factor)).rows


@pytest.mark.parametrize("every", [1, 2])
def test_a_sparse_gpt_s_task_loss_is_its_cross_entropy_and_backward_adds_the_aux(every):
    """Every ``moe_every``-th block is sparse; the Task's summed loss is the tokens' summed
    cross-entropy alone, its backward that of CE plus N times each block's aux losses (the
    grad check of the whole sparse GPT), and a mean is refused."""
    from scratchpar.nn import GPT, lm_loss
    from scratchpar.train.task import Task
    spec = Experts(3, 2, 1.0, balance=0.1, z_loss=0.01)
    model = perturb(GPT(7, 5, 4, 2, 2, np.random.default_rng(0), dtype=np.float64,
                        experts=spec, moe_every=every), np.random.default_rng(1))
    sparse = [i for i, b in enumerate(model.blocks) if isinstance(b.mlp[0], MixtureOfExperts)]
    assert sparse == [i for i in range(2) if (i + 1) % every == 0]
    task = Task(None, model, "tok")
    batch = on_device(np.random.default_rng(2).integers(1, 7, (3, 6)))
    total = task.loss(model, batch, "sum")
    assert float(total.data) == float(lm_loss(model, batch, "sum").data)
    assert model.routing()["balance_loss"] > 0
    with pytest.raises(ValueError, match="reduction='sum'"):
        task.loss(model, batch)
    ids = on_device(np.random.default_rng(3).integers(1, 7, (2, 5)))
    routed = [p for name, p in model.named_parameters()  # each router, an expert's W₁, LN₂
              if "router" in name or "experts.0.0" in name or "ln2" in name]
    layers = [m for _, m in model.named_modules() if isinstance(m, MixtureOfExperts)]
    check_carried(lambda: model(ids), routed, layers)
