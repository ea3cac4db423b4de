"""Point-to-point messages between pipeline stages on real ranks, in float64: a chain of
stages trained by send and recv, blocking or not, equals the chain on one device, gradient for
gradient (the conventions of ``test_mpi_duals.py``)."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from test_mpi_duals import TIGHT, close, leaf, rng, seeds

from scratchpar.autograd import no_grad
from scratchpar.comm.errors import CommError
from scratchpar.parallel import duals, links


@pytest.fixture(scope="module")
def pipe(comm):
    """The pipeline's own channel: its messages never mix with the tests' collectives."""
    return comm.dup(name="pipe")


def chain(x0, weights, extras, up):
    """The whole pipeline on one device: L = Σ_k<last Σ c_k ⊙ h_k + Σ up ⊙ h_last; h, ∂L/∂x and
    each ∂L/∂W_k on the host."""
    x = leaf(x0)
    ws = [leaf(w) for w in weights]
    h, loss = x, 0.0
    for k, w in enumerate(ws):
        h = (h @ w).tanh()
        loss = loss + (h * on_device(extras[k] if k < len(ws) - 1 else up)).sum()
    loss.backward()
    return host(h.data), host(x.grad), [host(w.grad) for w in ws]


@settings(max_examples=10)
@given(b=st.integers(1, 3), d=st.integers(1, 4), micro=st.integers(1, 3), seed=seeds)
@shared_verdict
def test_send_recv_pipeline_equals_one_device(comm, pipe, b, d, micro, seed):
    """Stage k = rank k; micro-batches all forward, then all backward in reverse (GPipe)."""
    if comm.size == 1:
        pytest.skip("a pipeline needs two ranks")
    k, last = comm.rank, comm.size - 1
    r = rng(seed)
    weights = [r.standard_normal((d, d)) for _ in range(comm.size)]
    data = [[r.standard_normal((b, d)) for _ in range(comm.size + 1)] for _ in range(micro)]
    w = leaf(weights[k])
    xs, ends = [], []
    for m in range(micro):  # x, c_0 … c_{last−1}, up of micro-batch m
        x = leaf(data[m][0]) if k == 0 else duals.recv((b, d), np.float64, pipe, k - 1, tag=m)
        h = (x @ w).tanh()
        xs.append(x)
        ends.append((h * on_device(data[m][-1])).sum() if k == last else
                    (h * on_device(data[m][k + 1])).sum() + duals.send(h, pipe, k + 1, tag=m))
        if k == last:
            expected_h = chain(data[m][0], weights, data[m][1:-1], data[m][-1])[0]
            close(h.data, expected_h, **TIGHT)
    for m in reversed(range(micro)):
        ends[m].backward()
    oracle = [chain(data[m][0], weights, data[m][1:-1], data[m][-1]) for m in range(micro)]
    close(w.grad, sum(o[2][k] for o in oracle), **TIGHT)
    if k == 0:
        for x, o in zip(xs, oracle):
            close(x.grad, o[1], **TIGHT)


@shared_verdict
def test_send_recv_without_grad_build_no_graph(comm, pipe):
    if comm.size == 1:
        pytest.skip("a message needs two ranks")
    with no_grad():
        if comm.rank == 0:
            token = duals.send(leaf(np.arange(6.0).reshape(2, 3)), pipe, 1)
            assert not token.requires_grad and token.item() == 0.0
        if comm.rank == 1:
            got = duals.recv((2, 3), np.float64, pipe, 0)
            assert not got.requires_grad
            assert np.array_equal(host(got.data), np.arange(6.0).reshape(2, 3))


@shared_verdict
def test_the_stand_in_for_the_remote_loss_scales_like_a_loss(comm, pipe):
    """d(3·token)/dx = 3 · ∂L_remote/∂x: the stand-in behaves as the downstream loss would."""
    if comm.size == 1:
        pytest.skip("a message needs two ranks")
    c = rng(9).standard_normal((2, 3))
    if comm.rank == 0:
        x0 = rng(10).standard_normal((2, 3))
        x = leaf(x0)
        (3.0 * duals.send(x.tanh(), pipe, 1)).backward()
        close(x.grad, 3 * c * (1 - np.tanh(x0) ** 2), **TIGHT)
    if comm.rank == 1:
        (duals.recv((2, 3), np.float64, pipe, 0) * on_device(c)).sum().backward()


def gpipe_blocking(pipe, w0, data, b, d):
    """Stage k = rank k of :func:`chain`, on the blocking duals: every micro-batch forward, then
    every one backward in reverse (GPipe). Returns ∂L/∂W_k and, on stage 0, each ∂L/∂x."""
    k, last = pipe.rank, pipe.size - 1
    w, xs, ends = leaf(w0), [], []
    for m, row in enumerate(data):
        x = leaf(row[0]) if k == 0 else duals.recv((b, d), np.float64, pipe, k - 1, tag=m)
        h = (x @ w).tanh()
        xs.append(x)
        ends.append((h * on_device(row[-1])).sum() if k == last else
                    (h * on_device(row[k + 1])).sum() + duals.send(h, pipe, k + 1, tag=m))
    for end in reversed(ends):
        end.backward()
    return host(w.grad), [host(x.grad) for x in xs if k == 0]


def gpipe_non_blocking(pipe, w0, data, b, d, end):
    """The same on the non-blocking duals, as a pipeline runtime posts them: every activation's
    receive before any compute, each waited for only by its forward; every gradient's receive
    before any backward; the sends waited for at the end. ``end`` is the receiving link's class."""
    k, last = pipe.rank, pipe.size - 1
    ups = [end(pipe, k - 1, pipe.tag(m)) for m in range(len(data))] if k > 0 else []
    xs = [duals.irecv((b, d), np.float64, up) for up in ups] or [leaf(row[0]) for row in data]
    w, downs, ends = leaf(w0), [], []
    for m, row in enumerate(data):
        if ups:
            ups[m].wait()  # this micro-batch's activation only
        h = (xs[m] @ w).tanh()
        ends.append((h * on_device(row[-1 if k == last else k + 1])).sum())
        if k < last:
            downs.append(links.Outgoing(pipe, k + 1, pipe.tag(m)))
            ends[m] = ends[m] + duals.isend(h, downs[m])
    for down in downs:
        down.expect()
    for m in reversed(range(len(data))):
        ends[m].backward()
    pipe.wait_all([up.send_grad() for up in ups] + [down.request for down in downs])
    return host(w.grad), [host(x.grad) for x in xs if k == 0]


@settings(max_examples=6)
@given(b=st.integers(1, 3), d=st.integers(1, 4), micro=st.integers(1, 3), seed=seeds,
       end=st.sampled_from(("Incoming", "Held")))
@shared_verdict
def test_non_blocking_send_recv_give_the_blocking_gradients(comm, pipe, b, d, micro, seed, end):
    """Posted early and waited for late (or, with Held, the gradient sent after backward), the
    non-blocking pair gives bitwise the gradients of the blocking one, which equal one device's."""
    if comm.size == 1:
        pytest.skip("a pipeline needs two ranks")
    r = rng(seed)
    weights = [r.standard_normal((d, d)) for _ in range(comm.size)]
    data = [[r.standard_normal((b, d)) for _ in range(comm.size + 1)] for _ in range(micro)]
    w_grad, x_grads = gpipe_non_blocking(pipe, weights[comm.rank], data, b, d,
                                         getattr(links, end))
    want_w, want_x = gpipe_blocking(pipe, weights[comm.rank], data, b, d)
    np.testing.assert_array_equal(w_grad, want_w)
    for got, want in zip(x_grads, want_x, strict=True):
        np.testing.assert_array_equal(got, want)
    oracle = [chain(row[0], weights, row[1:-1], row[-1]) for row in data]
    close(w_grad, sum(o[2][comm.rank] for o in oracle), **TIGHT)


@given(seed=seeds, scale=st.sampled_from((1.0, 3.0)))
@shared_verdict
def test_a_hand_off_between_chunks_of_one_rank_equals_one_graph(comm, seed, scale):
    """Two chunks of one rank joined by a hand-off (no message): each backward on its own, the
    gradients are bitwise those of one graph through both chunks."""
    r = rng(seed)
    x0, w1, w2, c = (r.standard_normal((2, 3)), r.standard_normal((3, 3)),
                     r.standard_normal((3, 3)), r.standard_normal((2, 3)))
    x, a, b = leaf(x0), leaf(w1), leaf(w2)
    link = links.HandOff()
    token = duals.isend((x @ a).tanh(), link)
    y = duals.irecv((2, 3), np.float64, link)
    (((y @ b).tanh() * on_device(c)).sum() * scale).backward()  # the second chunk's B
    token.backward()  # then the first's
    x1, a1, b1 = leaf(x0), leaf(w1), leaf(w2)
    ((((x1 @ a1).tanh() @ b1).tanh() * on_device(c)).sum() * scale).backward()
    for got, want in ((x.grad, x1.grad), (a.grad, a1.grad), (b.grad, b1.grad)):
        np.testing.assert_array_equal(host(got), host(want))


@shared_verdict
def test_a_gradient_wanted_before_its_backward_is_refused(comm, pipe):
    with pytest.raises(CommError, match="backward has not run"):
        links.Incoming(pipe, comm.rank, 0).send_grad()
    link = links.HandOff()
    duals.isend(leaf(np.ones(2)), link)
    with pytest.raises(CommError, match="before its receiver's backward"):
        link.gradient()
