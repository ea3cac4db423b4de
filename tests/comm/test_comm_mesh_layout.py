"""The mesh's layout math and its validation, on one process (splits emulated for every rank)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.comm import mesh
from scratchpar.comm.errors import CommError
from scratchpar.comm.mesh import Mesh, MeshError

mesh_shapes = st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))
PROPERTY = settings(deadline=None, max_examples=50)  # meshes of up to 64 ranks, all emulated


class SplitRecorder:
    """Rank ``rank`` of a world of ``size``: records every ``split`` instead of sending."""

    def __init__(self, rank, size):
        self.rank, self.size, self.name, self.splits = rank, size, "world", []

    def split(self, color, key=None, name=None):
        self.splits.append((color, key, name))
        return (color, key, name)


class Untouchable:
    """A world of ``size`` ranks that fails the test if anything but its size is asked for."""

    def __init__(self, size):
        self.size = size

    def __getattr__(self, attr):
        raise AssertionError(f"Mesh used comm.{attr} before validating its arguments")


def emulate(shape):
    """A Mesh on every rank of a world of prod(shape), with the splits recorded."""
    size = int(np.prod(shape))
    worlds = [SplitRecorder(r, size) for r in range(size)]
    return worlds, [Mesh(w, *shape) for w in worlds]


@PROPERTY
@given(mesh_shapes)
def test_coords_invert_the_row_major_layout(shape):
    dp, pp, tp = shape
    grid = mesh.layout(shape)
    assert grid.shape == shape and sorted(grid.reshape(-1)) == list(range(dp * pp * tp))
    for rank in range(dp * pp * tp):
        d, p, t = mesh.coords(rank, shape)
        assert rank == (d * pp + p) * tp + t  # tp fastest, then pp, then dp
        assert grid[d, p, t] == rank


@PROPERTY
@given(mesh_shapes)
def test_groups_differ_only_along_their_axis_and_partition_the_world(shape):
    size = int(np.prod(shape))
    for axis in range(3):
        groups = {tuple(mesh.group(r, axis, shape)) for r in range(size)}
        assert sorted(r for g in groups for r in g) == list(range(size))  # a partition
        for rank in range(size):
            members = mesh.group(rank, axis, shape)
            assert rank in members and len(members) == shape[axis]
            here = mesh.coords(rank, shape)
            for place, other in enumerate(members):
                there = mesh.coords(other, shape)
                assert there[axis] == place
                assert [c for a, c in enumerate(there) if a != axis] == \
                       [c for a, c in enumerate(here) if a != axis]


@PROPERTY
@given(mesh_shapes)
def test_megatron_order_tp_neighbours_adjacent_dp_farthest(shape):
    dp, pp, tp = shape
    for rank in range(dp * pp * tp):
        t0 = rank - rank % tp
        assert mesh.group(rank, 2, shape) == list(range(t0, t0 + tp))
        assert np.all(np.diff(mesh.group(rank, 1, shape)) == tp)
        assert np.all(np.diff(mesh.group(rank, 0, shape)) == pp * tp)


@PROPERTY
@given(mesh_shapes)
def test_split_colors_name_the_groups_and_keys_the_places(shape):
    size = int(np.prod(shape))
    for axis in range(3):
        colors, keys = zip(*(mesh.color_key(r, axis, shape) for r in range(size)))
        for rank in range(size):
            assert [r for r in range(size) if colors[r] == colors[rank]] == \
                   sorted(mesh.group(rank, axis, shape))
            assert keys[rank] == mesh.coords(rank, shape)[axis]


@PROPERTY
@given(mesh_shapes)
def test_mesh_splits_every_axis_in_order_into_its_groups(shape):
    worlds, meshes = emulate(shape)
    for world, m in zip(worlds, meshes):
        assert [name.split("/")[1][:2] for _, _, name in world.splits] == ["dp", "pp", "tp"]
        assert m.coords == mesh.coords(world.rank, shape)
        assert (m.dp, m.pp, m.tp) == shape and np.array_equal(m.layout, mesh.layout(shape))
        for axis, name in enumerate(mesh.AXES):
            assert m.comm(name) is getattr(m, f"{name}_comm")
            assert m.ranks(name) == mesh.group(world.rank, axis, shape)
            assert m.comm(name)[2] == f"world/{name}{m.ranks(name)}"
    for axis in range(3):  # MPI_Comm_split: equal colors share a communicator, ordered by key
        members = {}
        for world in worlds:
            color, key, _ = world.splits[axis]
            members.setdefault(color, []).append((key, world.rank))
        for world in worlds:
            color = world.splits[axis][0]
            assert [r for _, r in sorted(members[color])] == mesh.group(world.rank, axis, shape)


@pytest.mark.parametrize(("args", "size", "named"), [
    ((3, 1, 1), 2, ["it needs dp·pp·tp = 3·1·1 = 3 ranks, the world has 2 "
                    "(meshes that fit: dp×pp×tp = 1×1×2, 1×2×1, 2×1×1)"]),
    ((0, 1, 1), 1, ["dp must be a positive integer, got 0"]),
    ((2, -1, 1.5), 2, ["pp must be a positive integer, got -1",
                       "tp must be a positive integer, got 1.5"]),
    ((True, "2", None), 4, ["dp must be a positive integer, got True",
                            "pp must be a positive integer, got '2'",
                            "tp must be a positive integer, got None"]),
])
def test_mesh_error_lists_every_violation_before_any_message(args, size, named):
    with pytest.raises(MeshError) as caught:
        Mesh(Untouchable(size), *args)
    message = str(caught.value)
    assert message.startswith(f"Mesh(dp={args[0]!r}, pp={args[1]!r}, tp={args[2]!r})")
    assert f"world of {size} rank" in message
    assert message.split("\n  - ")[1:] == named  # one line per violation, all of them
    assert isinstance(caught.value, CommError)


def test_numpy_integers_are_valid_sizes():
    worlds, meshes = emulate((np.int64(2), np.int32(1), 2))
    assert meshes[3].coords == (1, 0, 1) and meshes[3].shape == (2, 1, 2)


def test_unknown_axis_is_refused():
    _, meshes = emulate((1, 1, 1))
    with pytest.raises(MeshError, match="axis must be one of"):
        meshes[0].ranks("sp")


@given(st.integers(1, 200))
def test_factorizations_are_every_ordered_triple(size):
    brute = [t for t in itertools.product(range(1, size + 1), repeat=2)
             if size % (t[0] * t[1]) == 0]
    assert mesh.factorizations(size) == [(a, b, size // (a * b)) for a, b in brute]


def test_long_lists_of_fits_are_cut_short():
    with pytest.raises(MeshError) as caught:
        mesh.check(64, 3, 1, 1)
    fits = str(caught.value).split("dp×pp×tp = ")[1].rstrip(")").split(", ")
    assert fits[-1] == "…"
    assert fits[:-1] == [f"{a}×{b}×{c}" for a, b, c in mesh.factorizations(64)[:12]]
    assert len(mesh.factorizations(64)) > mesh.MAX_FITS_SHOWN == 12


@PROPERTY
@given(mesh_shapes, st.data())
def test_drawing_shows_every_rank_once_and_marks_this_one(shape, data):
    size = int(np.prod(shape))
    rank = data.draw(st.integers(0, size - 1))
    text = mesh.draw(shape, rank)
    rows = text.splitlines()[2:-1]
    assert len(rows) == shape[0] * shape[1]
    cells = [c.strip("[]") for row in rows for c in row.split()[-shape[2]:]]
    assert cells == [str(r) for r in range(size)]
    assert text.count(f"[{rank}]") == 2 and text.count("[") == 2
    d, p, t = mesh.coords(rank, shape)
    assert text.splitlines()[-1] == f"this rank: [{rank}] at (dp={d}, pp={p}, tp={t})"
