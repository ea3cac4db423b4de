"""Shape and indexing ops: reshape, permute, getitem, gather, concat/split/stack, where, fill."""

import numpy as np
import pytest
from autograd_helpers import PROPERTY, leaf, normal, seeds, shapes
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from scratchpar.autograd import Tensor, grad_check
from scratchpar.autograd import functional as F


@st.composite
def reshape_case(draw):
    """A shape and another with the same size: its sides shuffled, with 1s inserted."""
    shape = draw(shapes())
    target = list(draw(st.permutations(shape))) if shape else []
    for _ in range(draw(st.integers(0, 2))):
        target.insert(draw(st.integers(0, len(target))), 1)
    if target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return shape, tuple(target)


@PROPERTY
@given(case=reshape_case(), seed=seeds)
def test_reshape(case, seed):
    shape, target = case
    x = normal(np.random.default_rng(seed), shape)
    out = x.reshape(target)
    np.testing.assert_array_equal(host(out.data), host(x.data).reshape(target))
    np.testing.assert_array_equal(host(F.reshape(x, *target).data), host(out.data))
    grad_check(lambda t: t.reshape(target), [x])


@st.composite
def permute_case(draw):
    shape = draw(shapes(min_dims=1, max_dims=4))
    return shape, tuple(draw(st.permutations(range(len(shape)))))


@PROPERTY
@given(case=permute_case(), seed=seeds)
def test_permute(case, seed):
    shape, axes = case
    x = normal(np.random.default_rng(seed), shape)
    out = x.permute(*axes)
    np.testing.assert_array_equal(host(out.data), np.transpose(host(x.data), axes))
    np.testing.assert_array_equal(host(F.permute(x, axes).data), host(out.data))
    grad_check(lambda t: t.permute(*axes), [x])


@PROPERTY
@given(shape=shapes(min_dims=2, max_dims=4), seed=seeds, data=st.data())
def test_transpose_swaps_two_axes(shape, seed, data):
    x = normal(np.random.default_rng(seed), shape)
    swapped = np.swapaxes(host(x.data), -1, -2)
    np.testing.assert_array_equal(host(x.T.data), swapped)
    np.testing.assert_array_equal(host(x.transpose().data), swapped)
    i = data.draw(st.integers(-len(shape), len(shape) - 1))
    j = data.draw(st.integers(-len(shape), len(shape) - 1))
    np.testing.assert_array_equal(host(F.transpose(x, i, j).data), np.swapaxes(host(x.data), i, j))
    grad_check(lambda t: F.transpose(t, i, j), [x])


@st.composite
def basic_index(draw):
    """A shape and a basic index: ints, slices with any step, None and Ellipsis."""
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=4))
    parts = []
    for n in shape:
        kind = draw(st.sampled_from(("int", "slice", "slice", "full")))
        if kind == "int":
            parts.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.none() | st.integers(-n, n))
            stop = draw(st.none() | st.integers(-n, n))
            step = draw(st.sampled_from([None, 1, 2, -1, -2]))
            parts.append(slice(start, stop, step))
        else:
            parts.append(slice(None))
    k = draw(st.integers(1, len(parts)))
    form = draw(st.sampled_from(("leading", "leading...", "...trailing")))
    if form == "...trailing":
        parts = [Ellipsis] + parts[len(parts) - k:]
    else:
        parts = parts[:k] + ([Ellipsis] if form == "leading..." else [])
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), None)
    return shape, tuple(parts)


@PROPERTY
@given(case=basic_index(), seed=seeds)
def test_getitem_basic(case, seed):
    shape, index = case
    x = normal(np.random.default_rng(seed), shape)
    out = x[index]
    expected = host(x.data)[index]
    np.testing.assert_array_equal(host(out.data), expected)
    grad_check(lambda t: t[index], [x])
    x.grad = None
    x[index].backward(np.ones(np.shape(expected)))
    hit = np.zeros(shape)
    hit[index] = 1.0
    np.testing.assert_array_equal(host(x.grad), hit)  # 1 where read, 0 elsewhere


@PROPERTY
@given(shape=shapes(min_dims=1, max_dims=3), seed=seeds, data=st.data())
def test_getitem_integer_array_with_repeats_accumulates(shape, seed, data):
    rng = np.random.default_rng(seed)
    x = normal(rng, shape)
    ids = data.draw(hnp.arrays(np.int64, st.integers(1, 6),
                               elements=st.integers(-shape[0], shape[0] - 1)))
    device_ids = on_device(ids)
    np.testing.assert_array_equal(host(x[device_ids].data), host(x.data)[ids])
    grad_check(lambda t: t[device_ids], [x])
    x.grad = None
    x[device_ids].backward(np.ones((len(ids),) + shape[1:]))
    counts = np.bincount(ids % shape[0], minlength=shape[0]).astype(np.float64)
    np.testing.assert_array_equal(host(x.grad), np.broadcast_to(
        counts.reshape((-1,) + (1,) * (len(shape) - 1)), shape))


@PROPERTY
@given(seed=seeds, rows=st.lists(st.integers(0, 2), min_size=1, max_size=5),
       cols=st.integers(0, 3))
def test_getitem_paired_index_arrays_and_mixed(seed, rows, cols):
    x = normal(np.random.default_rng(seed), (3, 4))
    r = on_device(np.array(rows))
    c = on_device(np.full(len(rows), cols))
    np.testing.assert_array_equal(host(x[r, c].data), host(x.data[r, c]))
    grad_check(lambda t: t[r, c], [x])
    grad_check(lambda t: t[1:, r], [x])  # a slice then an integer array
    grad_check(lambda t: t[Tensor(r)], [x])  # an index given as a Tensor


@PROPERTY
@given(shape=shapes(min_dims=1, max_dims=3), seed=seeds, data=st.data())
def test_getitem_boolean_mask(shape, seed, data):
    x = normal(np.random.default_rng(seed), shape)
    full = data.draw(hnp.arrays(np.bool_, shape))
    rows = data.draw(hnp.arrays(np.bool_, shape[:1]))
    for mask in (full, rows):
        device_mask = on_device(mask)
        np.testing.assert_array_equal(host(x[device_mask].data), host(x.data)[mask])
        grad_check(lambda t, m=device_mask: t[m], [x])
    x.grad = None
    x[on_device(full)].backward(np.full(int(full.sum()), 2.0))
    np.testing.assert_array_equal(host(x.grad), 2.0 * full)


@PROPERTY
@given(v=st.integers(1, 5), d=st.integers(1, 4), seed=seeds, data=st.data())
def test_gather_with_repeated_ids(v, d, seed, data):
    w = normal(np.random.default_rng(seed), (v, d))
    ids = data.draw(hnp.arrays(np.int64, shapes(min_dims=0, max_dims=2, max_side=4),
                               elements=st.integers(0, v - 1)))
    device_ids = on_device(ids)
    out = F.gather(w, device_ids)
    assert out.shape == ids.shape + (d,)
    np.testing.assert_array_equal(host(out.data), host(w.data)[ids])
    grad_check(lambda t: F.gather(t, device_ids), [w])
    w.grad = None
    F.gather(w, Tensor(device_ids)).backward(np.ones(ids.shape + (d,)))
    counts = np.bincount(ids.reshape(-1), minlength=v).astype(np.float64)
    np.testing.assert_array_equal(host(w.grad), np.repeat(counts[:, None], d, axis=1))


@st.composite
def concat_case(draw):
    """Shapes that agree except along ``axis``; ``axis`` may be negative."""
    base = list(draw(shapes(min_dims=1, max_dims=3)))
    axis = draw(st.integers(-len(base), len(base) - 1))
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    out = []
    for size in sizes:
        shape = list(base)
        shape[axis] = size
        out.append(tuple(shape))
    return out, axis, sizes


@PROPERTY
@given(case=concat_case(), seed=seeds)
def test_concat_then_split_round_trip(case, seed):
    part_shapes, axis, sizes = case
    rng = np.random.default_rng(seed)
    parts = [normal(rng, s) for s in part_shapes]
    joined = F.concat(parts, axis=axis)
    expected = np.concatenate([host(p.data) for p in parts], axis)
    np.testing.assert_array_equal(host(joined.data), expected)
    grad_check(lambda *ts: F.concat(ts, axis=axis), parts)
    back = F.split(joined, sizes, axis=axis)
    assert len(back) == len(parts)
    for p, q in zip(parts, back, strict=True):
        np.testing.assert_array_equal(host(q.data), host(p.data))
    whole = leaf(joined.data)
    weights = [on_device(rng.standard_normal(s)) for s in part_shapes]

    def weighted_parts(t):
        parts_t = F.split(t, sizes, axis=axis)
        return F.concat([q * w for q, w in zip(parts_t, weights, strict=True)], axis)

    grad_check(weighted_parts, [whole])


@PROPERTY
@given(shape=shapes(min_dims=1, max_dims=3), n=st.integers(1, 4), seed=seeds, data=st.data())
def test_stack_and_equal_split(shape, n, seed, data):
    rng = np.random.default_rng(seed)
    parts = [normal(rng, shape) for _ in range(n)]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    stacked = F.stack(parts, axis=axis)
    expected = np.stack([host(p.data) for p in parts], axis)
    np.testing.assert_array_equal(host(stacked.data), expected)
    grad_check(lambda *ts: F.stack(ts, axis=axis), parts)
    pieces = F.split(stacked, n, axis=axis)
    for p, q in zip(parts, pieces, strict=True):
        np.testing.assert_array_equal(host(q.data).reshape(shape), host(p.data))


def test_split_rejects_bad_sections():
    x = leaf(np.ones((2, 5)))
    with pytest.raises(ValueError, match="equal parts"):
        F.split(x, 2, axis=1)
    with pytest.raises(ValueError, match="add up"):
        F.split(x, [2, 2], axis=1)


@PROPERTY
@given(shapes3=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3),
       seed=seeds)
def test_where_broadcasts_condition_and_branches(shapes3, seed):
    cond_shape, a_shape, b_shape = shapes3.input_shapes
    rng = np.random.default_rng(seed)
    cond = rng.random(cond_shape) < 0.5
    device_cond = on_device(cond)
    a, b = normal(rng, a_shape), normal(rng, b_shape)
    out = F.where(device_cond, a, b)
    np.testing.assert_array_equal(host(out.data), np.where(cond, host(a.data), host(b.data)))
    grad_check(lambda x, y: F.where(device_cond, x, y), [a, b])
    grad_check(lambda x: F.where(Tensor(device_cond), x, 0.5), [a])  # constant branch
    a.grad = b.grad = None
    F.where(device_cond, a, b).backward(np.ones(shapes3.result_shape))
    full = np.broadcast_to(cond, shapes3.result_shape)
    assert host(a.grad).sum() == full.sum() and host(b.grad).sum() == (~full).sum()


@PROPERTY
@given(pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
       seed=seeds, value=st.sampled_from([0.0, -2.0, 3.5]))
def test_masked_fill(pair, seed, value):
    a_shape, mask_shape = pair.input_shapes
    rng = np.random.default_rng(seed)
    a = normal(rng, a_shape)
    mask = rng.random(mask_shape) < 0.5
    device_mask = on_device(mask)
    out = F.masked_fill(a, device_mask, value)
    np.testing.assert_array_equal(host(out.data), np.where(mask, value, host(a.data)))
    grad_check(lambda t: F.masked_fill(t, device_mask, value), [a])
    a.grad = None
    F.masked_fill(a, device_mask, value).backward(np.ones(pair.result_shape))
    kept = np.broadcast_to(~mask, pair.result_shape).astype(np.float64)
    expected = kept.sum(axis=tuple(range(kept.ndim - len(a_shape))))
    expected = expected.sum(axis=tuple(i for i, n in enumerate(a_shape) if n == 1 and
                                       expected.shape[i] != 1), keepdims=True)
    np.testing.assert_array_equal(host(a.grad), expected.reshape(a_shape))


def test_gather_accepts_python_lists_and_permute_without_axes_reverses():
    w = Tensor(on_device(np.arange(6.0).reshape(3, 2)), requires_grad=True)
    F.gather(w, [0, 2, 0]).sum().backward()
    np.testing.assert_array_equal(host(w.grad), [[2, 2], [0, 0], [1, 1]])
    x = Tensor(on_device(np.zeros((2, 3, 4))))
    assert F.permute(x).shape == (4, 3, 2)
