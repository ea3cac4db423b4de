"""The scatter-add under every gather's backward: NumPy's ``np.add.at`` sums, bit for bit, on
every device, whatever the index, and the same sums on every call; an embedding's rows alike,
holding a few integers a row rather than every element's position."""

import numpy as np
import pytest
from autograd_helpers import PROPERTY, seeds
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.peak import peak_bytes
from scratchpar.scatter import scatter_add, scatter_rows


def index_of(kind: str, rng: np.random.Generator, shape: tuple[int, int]):
    """A host index into ``shape`` that picks some positions many times."""
    rows = rng.integers(0, shape[0], size=3 * shape[0] + 2)  # more picks than rows: repeats
    if kind == "rows":
        return rows
    if kind == "pairs":
        return rows, rng.integers(0, shape[1], size=rows.size)
    if kind == "rows, slice":
        return rows, slice(1, None)
    return rng.random(shape) < 0.5  # a mask: each position at most once


KINDS = ("rows", "pairs", "rows, slice", "mask")


def on_device_index(index):
    if isinstance(index, tuple):
        return tuple(on_device(i) if isinstance(i, np.ndarray) else i for i in index)
    return on_device(index)


@PROPERTY
@given(kind=st.sampled_from(KINDS), seed=seeds)
def test_sums_equal_numpys_add_at_bitwise_and_repeat(kind, seed):
    rng = np.random.default_rng(seed)
    start = rng.standard_normal((5, 4))
    index = index_of(kind, rng, start.shape)
    values = rng.standard_normal(start[index].shape) * 10.0 ** rng.integers(-3, 4, size=1)
    expected = start.copy()
    np.add.at(expected, index, values)

    runs = []
    for _ in range(2):
        target = on_device(start.copy())  # its own memory on the CPU too
        scatter_add(target, on_device_index(index), on_device(values))
        runs.append(host(target))
    assert runs[0].tobytes() == expected.tobytes() == runs[1].tobytes()


def test_a_value_broadcasts_over_the_picked_positions():
    target = on_device(np.zeros(4))
    scatter_add(target, on_device(np.array([1, 1, 3])), 2.5)
    np.testing.assert_array_equal(host(target), [0.0, 5.0, 0.0, 2.5])


def test_a_strided_target_on_a_device_is_refused(device):
    target = on_device(np.zeros((3, 4))).T
    if device == "cpu":
        scatter_add(target, np.array([0, 0]), 1.0)
        np.testing.assert_array_equal(target[0], [2.0, 2.0, 2.0])
    else:
        with pytest.raises(ValueError, match="contiguous"):
            scatter_add(target, on_device(np.array([0, 0])), 1.0)


@PROPERTY
@given(seed=seeds, trailing=st.sampled_from([(), (3,), (2, 3)]))
def test_rows_sum_as_numpys_add_at_bitwise_and_repeat(seed, trailing):
    rng = np.random.default_rng(seed)
    start = rng.standard_normal((6, *trailing))
    ids = rng.integers(0, 6, size=20)  # more ids than rows: repeats
    values = rng.standard_normal((20, *trailing)) * 10.0 ** rng.integers(-3, 4, size=1)
    expected = start.copy()
    np.add.at(expected, ids, values)

    runs = []
    for _ in range(2):
        target = on_device(start.copy())
        scatter_rows(target, on_device(ids), on_device(values))
        runs.append(host(target))
    assert runs[0].tobytes() == expected.tobytes() == runs[1].tobytes()


def test_an_embedding_s_rows_hold_little_beside_its_gradient(device):
    """4,096 rows of 64 float64s (2 MiB). On a device the sort holds two integers a row
    (64 KiB), not every element's sorted position and value (6 MiB); NumPy's fast path holds
    every element's position (2 MiB) and no more."""
    rng = np.random.default_rng(0)
    ids, values = rng.integers(0, 50, size=4096), rng.standard_normal((4096, 64))
    target, ids, values = (on_device(a) for a in (np.zeros((50, 64)), ids, values))
    with peak_bytes() as seen:
        scatter_rows(target, ids, values)
    bound = values.nbytes * (1.1 if device == "cpu" else 0.1)
    assert seen.bytes < bound
