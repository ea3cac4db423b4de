"""The mesh on real ranks: every factorization of the world, its sub-communicators, bad meshes.
Collectives over its axes run on the test's device."""

import itertools

import numpy as np
import pytest
from device_helpers import host, on_device
from mpi_helpers import shared_verdict

from scratchpar.comm import collectives
from scratchpar.comm.mesh import AXES, Mesh, MeshError


def shapes_of(size):
    """Every (dp, pp, tp) with dp·pp·tp == size, by brute force."""
    return [s for s in itertools.product(range(1, size + 1), repeat=3) if np.prod(s) == size]


@pytest.fixture(scope="module")
def meshes(comm):
    """One Mesh per factorization of the world, built in the same order on every rank."""
    return [Mesh(comm, *shape) for shape in shapes_of(comm.size)]


@shared_verdict
def test_every_factorization_has_its_coordinates(comm, meshes):
    assert [m.shape for m in meshes] == shapes_of(comm.size)
    for m in meshes:
        dp, pp, tp = m.shape
        d, p, t = m.coords
        assert comm.rank == (d * pp + p) * tp + t
        assert m.layout[m.coords] == comm.rank


@shared_verdict
def test_sub_communicators_hold_exactly_their_group(comm, meshes):
    for m in meshes:
        grid = m.layout
        d, p, t = m.coords
        expected = {"dp": grid[:, p, t], "pp": grid[d, :, t], "tp": grid[d, p, :]}
        for axis, name in enumerate(AXES):
            sub = getattr(m, f"{name}_comm")
            assert sub.size == m.shape[axis] and sub.rank == m.coords[axis]
            assert m.ranks(name) == expected[name].tolist()
            assert sub.allgather_obj(comm.rank) == m.ranks(name)


@shared_verdict
def test_all_reduce_over_an_axis_sums_exactly_its_group(comm, meshes):
    for m in meshes:
        for name in AXES:
            one_hot = np.zeros(comm.size, np.int64)
            one_hot[comm.rank] = comm.rank + 1
            total = collectives.all_reduce(m.comm(name), on_device(one_hot))
            expected = np.zeros(comm.size, np.int64)
            expected[m.ranks(name)] = np.array(m.ranks(name)) + 1
            assert np.array_equal(host(total), expected), (m.shape, name)


@shared_verdict
def test_axes_are_independent_channels(comm, meshes):
    """Collectives started on all three axes at once finish, each with its own group's sum."""
    for m in meshes:
        x = np.full(3, float(comm.rank + 1))  # a copy on each axis: the sums are in place
        handles = [collectives.all_reduce_start(m.comm(a), on_device(x.copy())) for a in AXES]
        for name, handle in zip(AXES, handles):
            want = np.full(3, sum(r + 1 for r in m.ranks(name)))
            assert np.array_equal(host(handle.wait()), want)


@pytest.mark.parametrize("bad", [lambda n: (n + 1, 1, 1), lambda n: (1, 0, n),
                                 lambda n: (n, 1, -3), lambda n: (n, 2, 1.0)],
                         ids=["too many ranks", "zero", "negative", "float"])
@shared_verdict
def test_a_bad_mesh_raises_on_every_rank_before_any_message(comm, bad):
    with pytest.raises(MeshError, match=f"world of {comm.size} rank"):
        Mesh(comm, *bad(comm.size))
    good = Mesh(comm, dp=comm.size)  # the ranks are still in step: the next mesh pairs up
    assert good.dp_comm.allgather_obj(comm.rank) == list(range(comm.size))
    assert host(collectives.all_reduce(comm, on_device(np.ones(2)))).tolist() == [comm.size] * 2


@shared_verdict
def test_str_draws_this_rank(comm, meshes):
    for m in meshes:
        text = str(m)
        assert f"[{comm.rank}]" in text and f"dp={m.dp} × pp={m.pp} × tp={m.tp}" in text
