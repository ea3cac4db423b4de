"""The mesh on real ranks: every factorization of the world, its sub-communicators, bad meshes.
Collectives over its axes run on the test's device."""

import itertools
import math

import numpy as np
import pytest
from device_helpers import host, on_device
from mpi_helpers import shared_verdict

from scratchpar.comm import collectives
from scratchpar.comm.mesh import AXES, Axes, Mesh, MeshError


def shapes_of(size):
    """Every (pp, dp, cp, tp) whose product is ``size``, by brute force."""
    return [Axes(*s) for s in itertools.product(range(1, size + 1), repeat=4)
            if math.prod(s) == size]


@pytest.fixture(scope="module")
def meshes(comm):
    """One Mesh per factorization of the world, built in the same order on every rank."""
    return [Mesh(comm, dp=s.dp, pp=s.pp, tp=s.tp, cp=s.cp) for s in shapes_of(comm.size)]


@shared_verdict
def test_every_factorization_has_its_coordinates(comm, meshes):
    assert [m.shape for m in meshes] == shapes_of(comm.size)
    for m in meshes:
        _, dp, cp, tp = m.shape
        at = m.coords
        assert math.prod(m.shape) == comm.size
        assert comm.rank == ((at.pp * dp + at.dp) * cp + at.cp) * tp + at.tp
        assert m.layout[at] == comm.rank


@shared_verdict
def test_sub_communicators_hold_exactly_their_group(comm, meshes):
    for m in meshes:
        grid, at = m.layout, m.coords
        expected = {"pp": grid[:, at.dp, at.cp, at.tp], "dp": grid[at.pp, :, at.cp, at.tp],
                    "cp": grid[at.pp, at.dp, :, at.tp], "tp": grid[at.pp, at.dp, at.cp, :]}
        for axis, name in enumerate(AXES):
            sub = getattr(m, f"{name}_comm")
            assert sub.size == m.shape[axis] and sub.rank == m.coords[axis]
            assert m.ranks(name) == expected[name].tolist()
            assert sub.allgather_obj(comm.rank) == m.ranks(name)
        replicas = grid[at.pp, :, :, at.tp].reshape(-1).tolist()  # ordered by d·cp + c
        assert (m.replica_comm is m.dp_comm) == (m.cp == 1)
        assert m.replica_comm.size == m.dp * m.cp
        assert m.replica_comm.rank == at.dp * m.cp + at.cp
        assert m.replica_comm.allgather_obj(comm.rank) == replicas


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
def test_replicas_sum_exactly_the_ranks_sharing_their_stage_and_shard(comm, meshes):
    """The gradients' sum: every rank of this one's (pp, tp), over all its dp and cp."""
    for m in meshes:
        one_hot = np.zeros(comm.size, np.int64)
        one_hot[comm.rank] = comm.rank + 1
        total = host(collectives.all_reduce(m.replica_comm, on_device(one_hot)))
        for rank in range(comm.size):
            there = np.unravel_index(rank, m.shape)  # (p, d, c, t), found apart from the mesh
            alike = (there[0], there[3]) == (m.coords.pp, m.coords.tp)
            assert total[rank] == (rank + 1 if alike else 0), (m.shape, rank)


@shared_verdict
def test_axes_are_independent_channels(comm, meshes):
    """Collectives started on every axis (and on the replicas, where cp splits them) at once
    finish, each with its own group's sum."""
    for m in meshes:
        x = np.full(3, float(comm.rank + 1))  # a copy on each axis: the sums are in place
        groups = {name: (m.comm(name), m.ranks(name)) for name in AXES}
        if m.replica_comm is not m.dp_comm:
            groups["dp×cp"] = m.replica_comm, m.layout[m.coords.pp, :, :, m.coords.tp].ravel()
        handles = {name: collectives.all_reduce_start(sub, on_device(x.copy()))
                   for name, (sub, _) in groups.items()}
        for name, handle in handles.items():
            want = np.full(3, sum(r + 1 for r in groups[name][1]))
            assert np.array_equal(host(handle.wait()), want), (m.shape, name)


@pytest.mark.parametrize("bad", [lambda n: {"dp": n + 1}, lambda n: {"dp": 1, "pp": 0, "tp": n},
                                 lambda n: {"dp": n, "tp": -3},
                                 lambda n: {"dp": n, "pp": 2, "tp": 1.0},
                                 lambda n: {"dp": n, "cp": 2}],
                         ids=["too many ranks", "zero", "negative", "float", "cp too many"])
@shared_verdict
def test_a_bad_mesh_raises_on_every_rank_before_any_message(comm, bad):
    with pytest.raises(MeshError, match=f"world of {comm.size} rank"):
        Mesh(comm, **bad(comm.size))
    good = Mesh(comm, dp=comm.size)  # the ranks are still in step: the next mesh pairs up
    assert good.dp_comm.allgather_obj(comm.rank) == list(range(comm.size))
    assert host(collectives.all_reduce(comm, on_device(np.ones(2)))).tolist() == [comm.size] * 2


@shared_verdict
def test_str_draws_this_rank(comm, meshes):
    for m in meshes:
        text = str(m)
        cp = f"cp={m.cp} × " if m.cp > 1 else ""
        assert f"[{comm.rank}]" in text and f"dp={m.dp} × pp={m.pp} × {cp}tp={m.tp}" in text
        assert text.splitlines()[-1].startswith(f"this rank: [{comm.rank}] at (dp={m.coords.dp}")
