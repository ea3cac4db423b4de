"""The mesh's layout math and its validation, on one process (splits emulated for every rank)."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.comm import mesh
from scratchpar.comm.errors import CommError
from scratchpar.comm.mesh import AXES, Axes, Mesh, MeshError

mesh_shapes = st.builds(Axes, *(st.integers(1, 4) for _ in AXES)).filter(
    lambda shape: math.prod(shape) <= 64)
PROPERTY = settings(deadline=None, max_examples=50)  # meshes of up to 64 ranks, all emulated
PP, DP, CP, TP = range(4)  # the axes' places in AXES


class SplitRecorder:
    """Rank ``rank`` of a world of ``size``: records every ``split`` instead of sending."""

    def __init__(self, rank, size):
        self.rank, self.size, self.name, self.splits = rank, size, "world", []

    def split(self, color, key=None, name=None):
        made = (color, key, name)  # what the split returned, itself
        self.splits.append(made)
        return made


class Untouchable:
    """A world of ``size`` ranks that fails the test if anything but its size is asked for."""

    def __init__(self, size):
        self.size = size

    def __getattr__(self, attr):
        raise AssertionError(f"Mesh used comm.{attr} before validating its arguments")


def emulate(shape, **sizes):
    """A Mesh of ``shape`` on every rank of a world of prod(shape), with the splits recorded;
    ``sizes`` replace the keywords the Mesh is given."""
    size = math.prod(shape)
    worlds = [SplitRecorder(r, size) for r in range(size)]
    given = {"dp": shape.dp, "pp": shape.pp, "tp": shape.tp, "cp": shape.cp, **sizes}
    return worlds, [Mesh(w, **given) for w in worlds]


def split_groups(worlds, index):
    """MPI_Comm_split's groups for each rank's ``index``-th split: the world ranks that gave its
    color, ordered by their keys."""
    members = {}
    for world in worlds:
        color, key, _ = world.splits[index]
        members.setdefault(color, []).append((key, world.rank))
    return [[r for _, r in sorted(members[world.splits[index][0]])] for world in worlds]


def replicas(rank, shape):
    """World ranks sharing ``rank``'s pp and tp coordinates, ordered by d·cp + c, by search."""
    here, at = mesh.coords(rank, shape), [mesh.coords(r, shape) for r in range(math.prod(shape))]
    same = [r for r, there in enumerate(at) if (there.pp, there.tp) == (here.pp, here.tp)]
    return sorted(same, key=lambda r: at[r].dp * shape.cp + at[r].cp)


@PROPERTY
@given(mesh_shapes)
def test_coords_invert_the_row_major_layout(shape):
    pp, dp, cp, tp = shape
    size = math.prod(shape)
    grid = mesh.layout(shape)
    assert grid.shape == shape and sorted(grid.reshape(-1)) == list(range(size))
    for rank in range(size):
        at = mesh.coords(rank, shape)
        assert AXES == ("pp", "dp", "cp", "tp") and at._fields == AXES
        assert rank == ((at.pp * dp + at.dp) * cp + at.cp) * tp + at.tp  # tp fastest, pp slowest
        assert grid[at] == rank


@PROPERTY
@given(mesh_shapes)
def test_groups_differ_only_along_their_axis_and_partition_the_world(shape):
    size = math.prod(shape)
    for axis in range(len(AXES)):
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
def test_megatron_order_tp_neighbours_adjacent_then_cp_then_dp_pp_farthest(shape):
    pp, dp, cp, tp = shape
    for rank in range(math.prod(shape)):
        t0 = rank - rank % tp
        assert mesh.group(rank, TP, shape) == list(range(t0, t0 + tp))
        assert np.all(np.diff(mesh.group(rank, CP, shape)) == tp)
        assert np.all(np.diff(mesh.group(rank, DP, shape)) == cp * tp)
        assert np.all(np.diff(mesh.group(rank, PP, shape)) == dp * cp * tp)


@PROPERTY
@given(mesh_shapes)
def test_split_colors_name_the_groups_and_keys_the_places(shape):
    size = math.prod(shape)
    for axis in range(len(AXES)):
        colors, keys = zip(*(mesh.color_key(r, (axis,), shape) for r in range(size)))
        for rank in range(size):
            assert [r for r in range(size) if colors[r] == colors[rank]] == \
                   sorted(mesh.group(rank, axis, shape))
            assert keys[rank] == mesh.coords(rank, shape)[axis]
    colors, keys = zip(*(mesh.color_key(r, (DP, CP), shape) for r in range(size)))
    for rank in range(size):  # two axes: the group is their plane, the key d·cp + c
        assert [r for r in range(size) if colors[r] == colors[rank]] == \
               sorted(replicas(rank, shape))
        at = mesh.coords(rank, shape)
        assert keys[rank] == at.dp * shape.cp + at.cp


@PROPERTY
@given(mesh_shapes)
def test_mesh_splits_every_axis_in_order_into_its_groups(shape):
    worlds, meshes = emulate(shape)
    for world, m in zip(worlds, meshes):
        names = [name.split("/")[1] for _, _, name in world.splits]
        assert [n[:2] for n in names[:4]] == ["pp", "dp", "cp", "tp"]
        assert names[4:] == (["dp×cp"] if shape.cp > 1 else [])
        assert m.coords == mesh.coords(world.rank, shape) and m.shape == shape
        assert (m.pp, m.dp, m.cp, m.tp) == shape and np.array_equal(m.layout, mesh.layout(shape))
        assert repr(m).startswith(f"Mesh(dp={shape.dp}, pp={shape.pp}, "
                                  + (f"cp={shape.cp}, " if shape.cp > 1 else "")
                                  + f"tp={shape.tp}) on ")
        for axis, name in enumerate(AXES):
            assert m.comm(name) is getattr(m, f"{name}_comm") is world.splits[axis]
            assert m.ranks(name) == mesh.group(world.rank, axis, shape)
            assert m.comm(name)[2] == f"world/{name}{m.ranks(name)}"
    for axis in range(len(AXES)):  # MPI_Comm_split: equal colors share a communicator, by key
        assert split_groups(worlds, axis) == [mesh.group(w.rank, axis, shape) for w in worlds]
    if shape.cp == 1:  # the replicas are the dp group: no fifth split
        assert all(m.replica_comm is m.dp_comm for m in meshes)
        return
    assert split_groups(worlds, 4) == [replicas(w.rank, shape) for w in worlds]
    for world, m in zip(worlds, meshes):
        assert m.replica_comm is world.splits[4] and m.replica_comm[2] == "world/dp×cp"


def test_replicas_of_a_context_parallel_mesh_hold_the_same_stage_and_shard():
    worlds, meshes = emulate(Axes(pp=2, dp=2, cp=2, tp=2))
    groups = split_groups(worlds, 4)
    assert groups[0] == [0, 2, 4, 6] and groups[9] == [9, 11, 13, 15]
    assert meshes[9].coords == Axes(pp=1, dp=0, cp=0, tp=1)


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
        Mesh(Untouchable(size), *args)  # the constructor's order: dp, pp, tp
    message = str(caught.value)
    assert message.startswith(f"Mesh(dp={args[0]!r}, pp={args[1]!r}, tp={args[2]!r}) cannot")
    assert f"world of {size} rank" in message and "cp" not in message  # cp = 1 goes unsaid
    assert message.split("\n  - ")[1:] == named  # one line per violation, all of them
    assert isinstance(caught.value, CommError)


@pytest.mark.parametrize(("sizes", "size", "message"), [
    ({"dp": 1, "tp": 2, "cp": 2}, 3,
     "Mesh(dp=1, pp=1, tp=2, cp=2) cannot be laid out on a world of 3 ranks:\n"
     "  - it needs dp·pp·tp·cp = 1·1·2·2 = 4 ranks, the world has 3 (meshes that fit: "
     "dp×pp×tp×cp = 1×1×1×3, 1×1×3×1, 1×3×1×1, 3×1×1×1)"),
    ({"dp": 2, "cp": 0}, 2,
     "Mesh(dp=2, pp=1, tp=1, cp=0) cannot be laid out on a world of 2 ranks:\n"
     "  - cp must be a positive integer, got 0"),
])
def test_a_context_parallel_mesh_error_names_cp(sizes, size, message):
    with pytest.raises(MeshError) as caught:
        Mesh(Untouchable(size), **sizes)
    assert str(caught.value) == message


def test_dp_left_out_takes_the_ranks_the_other_axes_leave():
    _, meshes = emulate(Axes(pp=1, dp=2, cp=2, tp=2), dp=None)
    assert meshes[0].shape == Axes(pp=1, dp=2, cp=2, tp=2)


def test_numpy_integers_are_valid_sizes():
    _, meshes = emulate(Axes(pp=np.int32(1), dp=np.int64(2), cp=1, tp=2))
    assert meshes[3].coords == Axes(pp=0, dp=1, cp=0, tp=1)
    assert meshes[3].shape == (1, 2, 1, 2) and {type(n) for n in meshes[3].shape} == {int}


def test_unknown_axis_is_refused():
    _, meshes = emulate(Axes(1, 1, 1, 1))
    with pytest.raises(MeshError, match="axis must be one of"):
        meshes[0].ranks("sp")


@given(st.integers(1, 200), st.integers(1, 4))
def test_factorizations_are_every_ordered_tuple(size, axes):
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    brute = [t for t in itertools.product(divisors, repeat=axes) if math.prod(t) == size]
    assert mesh.factorizations(size, axes) == brute


@given(st.integers(1, 200))
def test_factorizations_default_to_every_ordered_triple(size):
    brute = [t for t in itertools.product(range(1, size + 1), repeat=2)
             if size % (t[0] * t[1]) == 0]
    assert mesh.factorizations(size) == [(a, b, size // (a * b)) for a, b in brute]


@pytest.mark.parametrize(("cp", "named"), [(1, "dp×pp×tp"), (2, "dp×pp×tp×cp")])
def test_long_lists_of_fits_are_cut_short(cp, named):
    with pytest.raises(MeshError) as caught:
        mesh.check(64, 3, 1, 1, cp)
    fits = str(caught.value).split(f"{named} = ")[1].rstrip(")").split(", ")
    axes = named.count("×") + 1
    assert fits[-1] == "…"
    assert fits[:-1] == ["×".join(map(str, f)) for f in mesh.factorizations(64, axes)[:12]]
    assert len(mesh.factorizations(64, axes)) > mesh.MAX_FITS_SHOWN == 12


@PROPERTY
@given(mesh_shapes, st.data())
def test_drawing_shows_every_rank_once_and_marks_this_one(shape, data):
    size = math.prod(shape)
    rank = data.draw(st.integers(0, size - 1))
    text = mesh.draw(shape, rank)
    lines = text.splitlines()
    assert lines[1].split() == [f"tp={t}" for t in range(shape.tp)]
    rows = lines[2:-1]
    assert len(rows) == shape.pp * shape.dp * shape.cp  # a row per (pp, dp, cp)
    cells = [[c.strip("[]") for c in row.split()[-shape.tp:]] for row in rows]
    assert [c for row in cells for c in row] == [str(r) for r in range(size)]
    for row, ranks in zip(rows, cells):  # each row headed by its ranks' pp, dp (and cp)
        at = mesh.coords(int(ranks[0]), shape)
        assert row.split()[:-shape.tp] == [f"pp={at.pp}", f"dp={at.dp}"] + \
               ([f"cp={at.cp}"] if shape.cp > 1 else [])
    assert text.count(f"[{rank}]") == 2 and text.count("[") == 2
    at = mesh.coords(rank, shape)
    cp = f"cp={at.cp}, " if shape.cp > 1 else ""
    assert lines[-1] == f"this rank: [{rank}] at (dp={at.dp}, pp={at.pp}, {cp}tp={at.tp})"
    unmarked = mesh.draw(shape).splitlines()
    assert unmarked[:2] == lines[:2] and len(unmarked) == len(lines) - 1
    assert "[" not in "".join(unmarked)
