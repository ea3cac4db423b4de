"""``target[index] += values`` with repeated positions summed, in the same order on every device.

An embedding's backward adds each token's gradient into its row, and a token may appear many
times in a batch. NumPy's ``np.add.at`` adds the repeats one after another, in the order they
appear. CuPy's ``cupyx.scatter_add`` adds them with atomics, in whatever order the GPU's threads
arrive, so two runs of the same step differ in the last bits, and a run that must repeat bit for
bit (a resumed checkpoint, one Hogwild worker against serial SGD) does not.

Here the repeats are put together by a stable sort of their keys (a row's id, or an element's
flat position), and one thread per element of a run's first row adds the run in order of
appearance: the sums of ``np.add.at``, bit for bit, on a GPU. Rows are sorted by id alone, so
an embedding's backward holds two integers a row beside the gradient, not a sorted copy of
every element and its position.
"""

from __future__ import annotations

import functools

import numpy as np

from . import double
from .backend import get_array_module


def scatter_add(target, index, values) -> None:
    """``target[index] += values`` in place; ``index`` is any NumPy index (integers, slices,
    integer arrays, masks) and ``values`` broadcasts to ``target[index]``'s shape."""
    xp = get_array_module(target)
    if xp is np:
        np.add.at(target, index, values)
        return
    _refuse_strided(target)
    picked = xp.arange(target.size).reshape(target.shape)[index]  # target[index]'s flat positions
    positions = picked.reshape(-1)  # (n,)
    values = xp.broadcast_to(xp.asarray(values, dtype=target.dtype), picked.shape).reshape(-1)
    order = xp.argsort(positions)  # stable on a GPU: repeats side by side, first seen first
    _add_runs(target.reshape(-1), positions[order], order, values, 1)


def scatter_rows(target, ids, values) -> None:
    """``target[ids] += values`` in place: ``target`` (V, ...), ``ids`` (N,) integers in [0, V),
    ``values`` (N, ...) rows of ``target``'s shape. An embedding's backward."""
    if target.size == 0:
        return
    xp = get_array_module(target)
    width = target[0].size  # elements a row
    if xp is np:  # np.add.at's 1-D path is the fast one: every element's flat position
        entries = (ids.reshape(-1, 1).astype(np.int64) * width  # (N·width,), past 2³¹ too
                   + np.arange(width)).reshape(-1)
        np.add.at(target.reshape(-1), entries, values.reshape(-1))
        return
    _refuse_strided(target)
    order = xp.argsort(ids)  # (N,) stable: repeated ids side by side, first seen first
    keys = ids[order].astype(xp.int64)  # the kernel's 64-bit keys, whatever the ids' type
    _add_runs(target.reshape(-1), keys, order, xp.ascontiguousarray(values).reshape(-1), width)


def _refuse_strided(target) -> None:
    if not target.flags.c_contiguous:
        raise ValueError("scatter_add writes through a flat view: the target must be contiguous")


def _add_runs(flat, keys, order, values, width: int) -> None:
    """Row ``keys[k]`` of ``flat`` (rows of ``width``) += row ``order[k]`` of ``values``, for
    each k, ``keys`` sorted: each run of one key in turn."""
    if get_array_module(flat) is double:
        double.add_runs(flat, keys, order, values, width)
    else:
        _cuda_runs()(keys, order, values, keys.size, width, flat, size=keys.size * width)


@functools.cache
def _cuda_runs():
    """One thread per element of a sorted row; the first row of each run adds the run."""
    import cupy

    return cupy.ElementwiseKernel(
        "raw int64 keys, raw int64 order, raw T values, int64 count, int64 width", "raw T flat",
        """
        const long long r = i / width, c = i % width;
        if (r == 0 || keys[r] != keys[r - 1]) {
            const long long at = keys[r] * width + c;
            T sum = flat[at];
            for (long long k = r; k < count && keys[k] == keys[r]; ++k)
                sum += values[order[k] * width + c];
            flat[at] = sum;
        }
        """, "scratchpar_add_runs")
