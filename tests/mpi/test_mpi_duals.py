"""Differentiable communication on real ranks, in float64, against single-process emulations.

Every rank builds every rank's data from one seed (on the host), so each can compute the
single-process answer itself; the tensors under test live on the test's device. The loss
convention is Megatron's: after an all-reduce the result is replicated and its loss counted
once (same upstream weights on every rank); elsewhere each rank's loss adds to the total,
L = Σ_r L_r, and ``x.grad`` on rank r must be ∂L/∂x_r.
"""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.autograd import Tensor, grad_check
from scratchpar.comm import collectives
from scratchpar.comm.chunks import bounds, counts
from scratchpar.comm.errors import CommError
from scratchpar.parallel import duals

seeds = st.integers(0, 2**31)
TIGHT = {"rtol": 1e-10, "atol": 1e-12}
NUMERIC = {"rtol": 1e-6, "atol": 1e-8}  # central differences, eps = 1e-6


def rng(seed, *stream):
    return np.random.default_rng([seed, *stream])


def rows_of(a, axis, span):
    return np.take(a, range(*span), axis=axis)


def leaf(a):
    """A tensor on the device that wants its gradient, from host data."""
    return Tensor(on_device(a.copy()), requires_grad=True)


def close(got, want, **tolerance):
    np.testing.assert_allclose(host(got), host(want), **tolerance)


def total_loss_grad(comm, loss_of, x, eps=1e-6):
    """∂(Σ_r L_r)/∂x on this rank by central differences, one rank's entries at a time
    (``x`` on the host; ``loss_of`` takes it on the device)."""
    grad = np.zeros_like(x)
    for q, n in enumerate(comm.allgather_obj(x.size)):
        for i in range(n):
            sides = []
            for step in (eps, -eps):
                mine = x.copy()
                if comm.rank == q:
                    mine.reshape(-1)[i] += step
                total = collectives.all_reduce(comm, on_device(np.array([loss_of(mine)])))
                sides.append(host(total)[0])
            if comm.rank == q:
                grad.reshape(-1)[i] = (sides[0] - sides[1]) / (2 * eps)
    return grad


@given(b=st.integers(1, 3), d=st.integers(1, 4), extra=st.integers(0, 4), seed=seeds)
@shared_verdict
def test_megatron_mlp_with_f_and_g_equals_one_device(comm, b, d, extra, seed):
    """Y = tanh(X·W1)·W2 with W1 split by columns and W2 by rows (Shoeybi et al. 2019, Fig. 3a)."""
    f = comm.size + extra  # every rank holds at least one column, the shares may differ
    r = rng(seed)
    x0, w1, w2, up = (r.standard_normal(s) for s in ((b, d), (d, f), (f, d), (b, d)))
    cols = slice(*bounds(f, comm.size)[comm.rank])
    x = leaf(x0)
    w1_r = leaf(w1[:, cols])  # W1[D, F/t]
    w2_r = leaf(w2[cols])  # W2[F/t, D]
    y = duals.all_reduce((duals.identity(x, comm) @ w1_r).tanh() @ w2_r, comm)
    (y * on_device(up)).sum().backward()
    one = [leaf(a) for a in (x0, w1, w2)]
    y0 = (one[0] @ one[1]).tanh() @ one[2]
    (y0 * on_device(up)).sum().backward()
    close(y.data, y0.data, **TIGHT)
    close(x.grad, one[0].grad, **TIGHT)
    close(w1_r.grad, host(one[1].grad)[:, cols], **TIGHT)
    close(w2_r.grad, host(one[2].grad)[cols], **TIGHT)


@settings(max_examples=10)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=2), seed=seeds)
@shared_verdict
def test_f_and_g_by_hand_and_by_finite_differences(comm, shape, seed):
    """L = Σ w ⊙ g(f(x) ⊙ a_r), so ∂L/∂x = w ⊙ Σ_r a_r: f sums what each rank's shard adds."""
    x0, w = rng(seed).standard_normal((2, *shape))
    a = [rng(seed, q).standard_normal(shape) for q in range(comm.size)]
    x, mine = leaf(x0), on_device(a[comm.rank])
    s = duals.all_reduce(duals.identity(x, comm) * mine, comm)
    close(s.data, x0 * sum(a), **TIGHT)
    (s * on_device(w)).sum().backward()
    close(x.grad, w * sum(a), **TIGHT)
    grad_check(lambda t: duals.all_reduce(duals.identity(t, comm) * mine, comm), [leaf(x0)])


@st.composite
def split_arrays(draw):
    """A shape, an axis to split or join along, and a total length along it (zero allowed)."""
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return shape, axis, draw(st.integers(0, 7))


def with_length(shape, axis, n):
    shape = list(shape)
    shape[axis] = n
    return tuple(shape)


@given(case=split_arrays(), seed=seeds)
@shared_verdict
def test_all_gather_joins_forward_and_reduce_scatters_backward(comm, case, seed):
    shape, axis, n = case
    spans = bounds(n, comm.size)
    xs = [rng(seed, q).standard_normal(with_length(shape, axis, c))
          for q, c in enumerate(counts(n, comm.size))]
    ups = [rng(seed, q, 1).standard_normal(with_length(shape, axis, n)) for q in range(comm.size)]
    x = leaf(xs[comm.rank])
    y = duals.all_gather(x, comm, axis=axis)
    assert np.array_equal(host(y.data), np.concatenate(xs, axis=axis))
    (y * on_device(ups[comm.rank])).sum().backward()
    close(x.grad, rows_of(sum(ups), axis, spans[comm.rank]), **TIGHT)


@given(case=split_arrays(), seed=seeds)
@shared_verdict
def test_reduce_scatter_sums_forward_and_all_gathers_backward(comm, case, seed):
    shape, axis, n = case
    spans = bounds(n, comm.size)
    xs = [rng(seed, q).standard_normal(with_length(shape, axis, n)) for q in range(comm.size)]
    ups = [rng(seed, q, 1).standard_normal(with_length(shape, axis, c))
           for q, c in enumerate(counts(n, comm.size))]
    x = leaf(xs[comm.rank])
    y = duals.reduce_scatter(x, comm, axis=axis)
    close(y.data, rows_of(sum(xs), axis, spans[comm.rank]), **TIGHT)
    (y * on_device(ups[comm.rank])).sum().backward()
    assert np.array_equal(host(x.grad), np.concatenate(ups, axis=axis))


@pytest.mark.parametrize("axis", [0, 1])
@shared_verdict
def test_gather_and_scatter_by_finite_differences(comm, axis):
    """∂(Σ_r L_r)/∂x_r numerically, perturbing one rank's entries at a time."""
    n = comm.size + 1
    mine = counts(n, comm.size)[comm.rank]
    up = on_device(rng(5, comm.rank).standard_normal(with_length((2, 3), axis, n)))
    x0 = rng(6, comm.rank).standard_normal(with_length((2, 3), axis, mine))

    def gathered(a):
        return (duals.all_gather(leaf(a), comm, axis=axis).tanh() * up).sum().item()

    x = leaf(x0)
    (duals.all_gather(x, comm, axis=axis).tanh() * up).sum().backward()
    close(x.grad, total_loss_grad(comm, gathered, x0), **NUMERIC)
    z0 = rng(7, comm.rank).standard_normal(with_length((2, 3), axis, n))
    w = on_device(rng(8, comm.rank).standard_normal(x0.shape))

    def scattered(a):
        return (duals.reduce_scatter(leaf(a) ** 2, comm, axis=axis) * w).sum().item()

    z = leaf(z0)
    (duals.reduce_scatter(z ** 2, comm, axis=axis) * w).sum().backward()
    close(z.grad, total_loss_grad(comm, scattered, z0), **NUMERIC)


@shared_verdict
def test_all_gather_refuses_rows_its_backward_cannot_split(comm):
    if comm.size == 1:
        pytest.skip("one rank always holds counts(N, 1) rows")
    x = np.ones((int(comm.rank > 0), 2))  # [0, 1, 1, …] rows, not counts(p − 1, p)
    with pytest.raises(CommError, match="splits .* rows as"):
        duals.all_gather(leaf(x), comm)
