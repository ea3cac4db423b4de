"""Language models are causal, and the padded LM loss counts exactly the non-pad targets."""

import numpy as np
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from nn_helpers import MAX_LEN, MODEL_KINDS, SOME, VOCAB, make_model, param_grads

from scratchpar.autograd import Tensor
from scratchpar.backend import get_array_module
from scratchpar.nn import count_targets, lm_loss, shift
from scratchpar.nn.loss import PAD

seeds = st.integers(0, 2**31 - 1)


@SOME
@given(kind=st.sampled_from(MODEL_KINDS), b=st.integers(1, 3), t=st.integers(2, MAX_LEN),
       seed=seeds, data=st.data())
def test_future_tokens_do_not_change_earlier_logits(kind, b, t, seed, data):
    rng = np.random.default_rng(seed)
    model = make_model(kind, seed)
    ids = rng.integers(0, VOCAB, size=(b, t))
    j = data.draw(st.integers(1, t - 1))
    changed = ids.copy()
    changed[:, j:] = (ids[:, j:] + rng.integers(1, VOCAB, size=(b, t - j))) % VOCAB  # all differ
    before, after = host(model(on_device(ids)).data), host(model(on_device(changed)).data)
    np.testing.assert_allclose(after[:, :j], before[:, :j], rtol=1e-13, atol=1e-13)
    assert not np.allclose(after[:, j], before[:, j])  # the changed position itself does move


@SOME
@given(kind=st.sampled_from(MODEL_KINDS), t=st.integers(2, MAX_LEN), seed=seeds, data=st.data())
def test_gradient_of_an_early_logit_ignores_future_embeddings(kind, t, seed, data):
    """d logits[:, i] / d (embedding row of a token seen only after i) is exactly zero."""
    model = make_model(kind, seed)
    i = data.draw(st.integers(0, t - 2))
    ids = np.ones((1, t), dtype=np.int64)
    ids[0, i + 1:] = 2  # token 2 appears only after position i
    model(on_device(ids))[:, i].sum().backward()
    table = model.tok.weight if kind == "gpt" else model.embed.weight
    grad = host(table.grad)
    np.testing.assert_array_equal(grad[2], 0.0)
    assert np.abs(grad[1]).max() > 0


@st.composite
def padded_batch(draw):
    """B (b, n+1): each row a sentence of tokens 1..V−1 and then pad (0); lengths ≥ 1."""
    b = draw(st.integers(1, 4))
    n = draw(st.integers(1, MAX_LEN))
    lengths = draw(st.lists(st.integers(1, n + 1), min_size=b, max_size=b))
    lengths[draw(st.integers(0, b - 1))] = draw(st.integers(2, n + 1))  # ≥ 1 counted target
    tokens = draw(st.lists(st.integers(1, VOCAB - 1), min_size=b * (n + 1),
                           max_size=b * (n + 1)))
    batch = np.array(tokens, dtype=np.int64).reshape(b, n + 1)
    for row, length in enumerate(lengths):
        batch[row, length:] = PAD
    return batch, lengths


def np_lm_loss(logits, targets):
    """Mean over non-pad targets of −log softmax(logits)[target], by hand."""
    shifted = logits - logits.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    mask = targets != PAD
    return -logp[mask, targets[mask]].sum() / mask.sum()


@SOME
@given(kind=st.sampled_from(MODEL_KINDS), case=padded_batch(), seed=seeds)
def test_lm_loss_is_the_mean_over_non_pad_targets(kind, case, seed):
    batch, lengths = case
    model = make_model(kind, seed)
    device_batch = on_device(batch)
    x, y = shift(device_batch)
    np.testing.assert_array_equal(host(x), batch[:, :-1])
    np.testing.assert_array_equal(host(y), batch[:, 1:])
    count = count_targets(device_batch)
    assert count == sum(n - 1 for n in lengths) == (batch[:, 1:] != PAD).sum()
    loss = lm_loss(model, device_batch)
    np.testing.assert_allclose(host(loss.data), np_lm_loss(host(model(x).data), host(y)),
                               rtol=1e-12)
    total = lm_loss(model, device_batch, reduction="sum")
    np.testing.assert_allclose(host(total.data), host(loss.data * count), rtol=1e-12)


@SOME
@given(kind=st.sampled_from(MODEL_KINDS), case=padded_batch(), seed=seeds)
def test_padding_contributes_no_loss_and_no_gradient(kind, case, seed):
    batch, _ = case
    model = make_model(kind, seed)
    device_batch = on_device(batch)
    x, y = shift(batch)
    pad = (y == PAD)[..., None]  # (b, n, 1)
    logits = Tensor(model(on_device(x)).data, requires_grad=True)
    loss = lm_loss(lambda _: logits, device_batch)
    loss.backward()
    assert (host(logits.grad)[np.broadcast_to(pad, logits.shape)] == 0.0).all()
    rng = np.random.default_rng(seed)
    noise = Tensor(on_device(50.0 * rng.standard_normal(logits.shape) * pad))  # at pad targets
    clean = lm_loss(model, device_batch).data
    assert lm_loss(lambda ids: model(ids) + noise, device_batch).data == clean
    junk = on_device(rng.integers(1, VOCAB, size=x.shape))  # real tokens where inputs are pad

    def unpadded_inputs(ids):
        return model(get_array_module(ids).where(ids == PAD, junk, ids))

    np.testing.assert_allclose(host(lm_loss(unpadded_inputs, device_batch).data), host(clean),
                               rtol=1e-13)


@SOME
@given(kind=st.sampled_from(MODEL_KINDS), case=padded_batch(), seed=seeds)
def test_padded_batch_grads_equal_those_of_rows_cut_short(kind, case, seed):
    """∇ mean-loss(padded B) = Σ_rows ∇ sum-loss(row without its padding) / #targets."""
    batch, lengths = case
    batch = on_device(batch)
    model = make_model(kind, seed)
    lm_loss(model, batch).backward()
    padded = param_grads(model)
    model.zero_grad()
    for row, length in enumerate(lengths):
        if length >= 2:
            lm_loss(model, batch[row:row + 1, :length], reduction="sum").backward()
    cut = param_grads(model)
    count = host(count_targets(batch))
    for name in padded:
        np.testing.assert_allclose(padded[name], cut[name] / count, rtol=1e-10, atol=1e-13,
                                   err_msg=name)
