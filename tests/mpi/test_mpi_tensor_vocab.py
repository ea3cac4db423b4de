"""The vocabulary-parallel embedding (both reductions), the tied head and the vocabulary-parallel
cross-entropy on real ranks equal their single-device twins: outputs, losses and each rank's
slices of the gradients, in float64, for vocabularies the group size does not divide (some
ranks owning no row when V < ranks), with padding targets and targets in every rank's range."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import WORLD, shared_verdict

from scratchpar import nn
from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.comm import collectives
from scratchpar.comm.chunks import bounds
from scratchpar.double import watch
from scratchpar.nn.gpt import TiedHead
from scratchpar.parallel.tensor.cross_entropy import vocab_parallel_cross_entropy
from scratchpar.parallel.tensor.embedding import (
    SequenceParallelEmbedding,
    SequenceParallelTiedHead,
    VocabParallelEmbedding,
    VocabParallelTiedHead,
)

TIGHT = {"rtol": 1e-10, "atol": 1e-12}
vocab = st.integers(1, 9)  # fewer ids than ranks, or not divisible by them
reductions = st.sampled_from(["mean", "sum"])
pads = st.sampled_from([-100, 0])  # 0: the language model's PAD, itself a vocabulary id


def mine(comm, n: int) -> slice:
    start, stop = bounds(n, comm.size)[comm.rank]
    return slice(start, stop)


def token_ids(seed, v, b, t):
    """(b, t) ids in [0, v) holding every id (so every rank's rows) when b·t ≥ v."""
    rng = np.random.default_rng([seed, 2])
    ids = np.concatenate([np.arange(v), rng.integers(0, v, max(b * t - v, 0))])[:b * t]
    return rng.permutation(ids).reshape(b, t)


def targets_of(seed, v, extra, pad):
    """Every id once (every rank's range), ``extra`` more, about a third of them ``pad``."""
    rng = np.random.default_rng([seed, 4])
    ys = np.concatenate([np.arange(v), rng.integers(0, v, extra)])
    ys[rng.random(ys.size) < 1 / 3] = pad
    return rng.permutation(ys)


def embedding(v, d, seed):
    return nn.Embedding(v, d, np.random.default_rng(seed), dtype=np.float64)


@settings(max_examples=10)
@given(v=vocab, d=st.integers(1, 4), b=st.integers(1, 3), t=st.integers(1, 6),
       sequence=st.booleans(), seed=st.integers(0, 2**31))
@shared_verdict
def test_vocab_parallel_embedding_equals_its_twin(comm, v, d, b, t, sequence, seed):
    twin = embedding(v, d, seed)
    layer = (SequenceParallelEmbedding if sequence else VocabParallelEmbedding)(twin, comm)
    ids = on_device(token_ids(seed, v, b, t))
    y, y_twin = layer(ids), twin(ids)
    positions = mine(comm, t) if sequence else slice(None)  # this rank's part of the sequence
    np.testing.assert_allclose(host(y.data), host(y_twin.data)[:, positions], **TIGHT)
    g = np.random.default_rng([seed, 3]).standard_normal((b, t, d))
    y.backward(on_device(g[:, positions]))
    y_twin.backward(on_device(g))
    assert layer.weight.shape == (len(range(v)[mine(comm, v)]), d)
    np.testing.assert_allclose(host(layer.weight.grad), host(twin.weight.grad)[mine(comm, v)],
                               **TIGHT)


@settings(max_examples=10)
@given(v=vocab, d=st.integers(1, 4), b=st.integers(1, 3), t=st.integers(1, 5),
       sequence=st.booleans(), pad=pads, reduction=reductions, seed=st.integers(0, 2**31))
@shared_verdict
def test_tied_head_and_loss_equal_the_tied_gpt_ends(comm, v, d, b, t, sequence, pad, reduction,
                                                     seed):
    """ids → embedding + h → tied head → loss: the shard's one Parameter gets both uses'
    gradients, and h (the blocks' stand-in) gets f's (or the all-gather's) summed gradient."""
    twin = embedding(v, d, seed)
    twin_head = TiedHead(twin)
    emb_class, head_class = ((SequenceParallelEmbedding, SequenceParallelTiedHead) if sequence
                             else (VocabParallelEmbedding, VocabParallelTiedHead))
    layer = emb_class(twin, comm)
    head = head_class(layer)
    assert head.weight is layer.weight
    ids = on_device(token_ids(seed, v, b, t))
    ys = on_device(targets_of(seed, v, b * t, pad)[:b * t])
    whole_h = np.random.default_rng([seed, 5]).standard_normal((b, t, d))
    positions = mine(comm, t) if sequence else slice(None)
    h, h_twin = (Tensor(on_device(whole_h[:, positions]), requires_grad=True),
                 Tensor(on_device(whole_h), requires_grad=True))
    logits, logits_twin = head(layer(ids) + h), twin_head(twin(ids) + h_twin)  # (b, t, V_t)
    np.testing.assert_allclose(host(logits.data), host(logits_twin.data)[..., mine(comm, v)],
                               **TIGHT)
    loss = vocab_parallel_cross_entropy(logits.reshape(b * t, -1), ys, comm, pad, reduction)
    loss_twin = F.cross_entropy(logits_twin.reshape(b * t, v), ys, pad, reduction)
    np.testing.assert_allclose(host(loss.data), host(loss_twin.data), **TIGHT)
    loss.backward()
    loss_twin.backward()
    np.testing.assert_allclose(host(h.grad), host(h_twin.grad)[:, positions], **TIGHT)
    np.testing.assert_allclose(host(layer.weight.grad), host(twin.weight.grad)[mine(comm, v)],
                               **TIGHT)


def both_losses(comm, whole, ys, pad, reduction):
    """(loss, its logits) for this rank's columns, and the twin's on the whole logits."""
    logits = Tensor(on_device(whole[:, mine(comm, whole.shape[1])]), requires_grad=True)
    logits_twin = Tensor(on_device(whole), requires_grad=True)
    loss = vocab_parallel_cross_entropy(logits, on_device(ys), comm, pad, reduction)
    twin = F.cross_entropy(logits_twin, on_device(ys), pad, reduction)
    return (loss, logits), (twin, logits_twin)


def check_losses(comm, whole, ys, pad, reduction, upstream):
    (loss, logits), (twin, logits_twin) = both_losses(comm, whole, ys, pad, reduction)
    np.testing.assert_allclose(host(loss.data), host(twin.data), **TIGHT)
    assert len(set(WORLD.allgather_obj(host(loss.data).tobytes()))) == 1  # the same bits
    loss.backward(on_device(np.asarray(upstream)))
    twin.backward(on_device(np.asarray(upstream)))
    np.testing.assert_allclose(host(logits.grad),
                               host(logits_twin.grad)[:, mine(comm, whole.shape[1])], **TIGHT)


@settings(max_examples=25)
@given(v=vocab, extra=st.integers(0, 6), scale=st.sampled_from([1.0, 30.0]), pad=pads,
       reduction=reductions, seed=st.integers(0, 2**31))
@shared_verdict
def test_vocab_parallel_cross_entropy_equals_cross_entropy(comm, v, extra, scale, pad,
                                                           reduction, seed):
    ys = targets_of(seed, v, extra, pad)
    whole = scale * np.random.default_rng([seed, 1]).standard_normal((ys.size, v))  # (N, V)
    upstream = np.random.default_rng([seed, 6]).uniform(0.5, 2.0)
    check_losses(comm, whole, ys, pad, reduction, upstream)


@settings(max_examples=10)
@given(v=vocab, extra=st.integers(0, 6), pad=pads, reduction=reductions,
       seed=st.integers(0, 2**31))
@shared_verdict
def test_in_fp16_the_loss_is_one_devices_in_fp32(comm, v, extra, pad, reduction, seed):
    """fp16 logits: the loss in fp32 as one device's (computed and reduced in fp32 inside; the
    order of the sums differs, so to fp32's rounding); under a loss scale, the gradient in
    fp16, equal to the twin's to fp16's rounding."""
    ys = targets_of(seed, v, extra, pad)
    whole = (8 * np.random.default_rng([seed, 1]).standard_normal((ys.size, v))).astype(np.float16)
    (loss, logits), (twin, logits_twin) = both_losses(comm, whole, ys, pad, reduction)
    assert loss.dtype == twin.dtype == np.float32
    np.testing.assert_allclose(host(loss.data), host(twin.data), rtol=1e-6, atol=1e-6)
    loss.backward(on_device(np.asarray(2.0**10, np.float32)))
    twin.backward(on_device(np.asarray(2.0**10, np.float32)))
    assert logits.grad.dtype == np.float16
    np.testing.assert_allclose(host(logits.grad).astype(np.float64),
                               host(logits_twin.grad)[:, mine(comm, v)].astype(np.float64),
                               rtol=2e-3, atol=2.0**10 * 2e-3)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("rows", [0, 3])
def test_vocab_parallel_cross_entropy_without_counted_targets(comm, reduction, rows):
    """No target counted (or no row at all): the loss and gradients F.cross_entropy gives, 0."""
    whole = np.random.default_rng(7).standard_normal((rows, 5))
    check_losses(comm, whole, np.full(rows, -100), -100, reduction, 1.0)


def test_vocab_parallel_cross_entropy_sends_no_vocabulary_wide_array(comm, monkeypatch):
    """Every buffer any collective carries has N (+ ranks) or 2N numbers, whatever V is: the
    whole logits, or any (N, V) array, never cross the group."""
    seen = []
    for name in ("all_reduce", "all_reduce_", "all_gather", "reduce_scatter", "broadcast_",
                 "reduce", "gather", "scatter"):
        real = getattr(collectives, name)

        def spy(c, x, *args, _real=real, **kwargs):
            seen.append(x.shape)
            return _real(c, x, *args, **kwargs)

        monkeypatch.setattr(collectives, name, spy)
    n, v = 4, 1000 * comm.size + 1
    ys = targets_of(0, v, 0, -100)[:n]
    whole = np.random.default_rng(8).standard_normal((n, v))
    (loss, _), _ = both_losses(comm, whole, ys, -100, "mean")
    loss.backward()
    assert seen == [(n + comm.size,), (2, n)]  # [row maxima | widths] (max), [Σ exp; target] (sum)


def test_the_vocabulary_parallel_ends_never_wait_for_the_device(comm, device):
    """Embedding, tied head and loss, forward and backward: no host sync in the engine."""
    if device != "double":
        pytest.skip("only the double counts what the host waited for")
    layer = VocabParallelEmbedding(embedding(7, 3, 0), comm)
    head = VocabParallelTiedHead(layer)
    ids, ys = on_device(token_ids(0, 7, 2, 4)), on_device(targets_of(0, 7, 1, 0))
    with watch() as seen:
        vocab_parallel_cross_entropy(head(layer(ids)).reshape(8, -1), ys, comm, 0).backward()
    assert seen.syncs_from("scratchpar") == []
