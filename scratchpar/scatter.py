"""``target[index] += values`` with repeated positions summed, in the same order on every device.

An embedding's backward adds each token's gradient into its row, and a token may appear many
times in a batch. NumPy's ``np.add.at`` adds the repeats one after another, in the order they
appear. CuPy's ``cupyx.scatter_add`` adds them with atomics, in whatever order the GPU's threads
arrive, so two runs of the same step differ in the last bits, and a run that must repeat bit for
bit (a resumed checkpoint, one Hogwild worker against serial SGD) does not.

Here the repeats are put together by a stable sort of their positions, and one thread per
position adds its run in order of appearance: the sums of ``np.add.at``, bit for bit, on a GPU.
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
    if not target.flags.c_contiguous:
        raise ValueError("scatter_add writes through a flat view: the target must be contiguous")
    picked = xp.arange(target.size).reshape(target.shape)[index]  # target[index]'s flat positions
    positions = picked.reshape(-1)  # (n,)
    values = xp.broadcast_to(xp.asarray(values, dtype=target.dtype), picked.shape).reshape(-1)
    order = xp.argsort(positions)  # stable on a GPU: repeats side by side, first seen first
    _add_runs(target.reshape(-1), positions[order], values[order])


def _add_runs(flat, positions, values) -> None:
    """``flat[p] += v`` for each (p, v), ``positions`` sorted: each run of one position in turn."""
    if get_array_module(flat) is double:
        double.add_runs(flat, positions, values)
    else:
        _cuda_runs()(positions, values, positions.size, flat, size=positions.size)


@functools.cache
def _cuda_runs():
    """One thread per entry; the first entry of each run adds the run into ``flat``."""
    import cupy

    return cupy.ElementwiseKernel(
        "raw int64 positions, raw T values, int64 count", "raw T flat",
        """
        if (i == 0 || positions[i] != positions[i - 1]) {
            const long long p = positions[i];
            T sum = flat[p];
            for (long long k = i; k < count && positions[k] == p; ++k) sum += values[k];
            flat[p] = sum;
        }
        """, "scratchpar_add_runs")
