"""The shapes of the activations between stages, agreed once per batch shape, not per message."""

from __future__ import annotations

import numpy as np

from ...autograd import Tensor
from ...backend import xp_default
from .actions import place

DTYPES = ("float16", "float32", "float64", "bfloat16")  # what an activation may be
WIDTH = 8  # a shape message: [dtype code, ndim, dims…], padded


def agree_shapes(chunks, comm, empty_inputs) -> dict[int, tuple[tuple, str]]:
    """For each virtual stage k > 0 that this rank runs: (row shape, dtype) of its input.

    Virtual stage 0 runs its layers on ``empty_inputs``, the micro-batch inputs cut to 0 rows,
    which costs nothing. Its output's shape goes to stage 1 in one small message, and so on
    down the pipeline: p·v − 1 messages, once for each shape of batch (every layer keeps rows
    first, so a micro-batch of r rows sends (r, *row shape)).
    """
    p = comm.size
    last = p * len(chunks) - 1
    rows: dict[int, tuple[tuple, str]] = {}
    x = empty_inputs
    for k in range(last):
        rank, chunk = place(k, p)
        receiver, _ = place(k + 1, p)
        if rank == comm.rank:
            if k > 0:
                shape, dtype = rows[k]
                x = Tensor(xp_default().empty((0, *shape), dtype))
            out = chunks[chunk](x)
            message = _encode(out.shape[1:], out.dtype)
            if receiver == comm.rank:
                rows[k + 1] = _decode(message)
            else:
                comm.send(message, receiver)
        elif receiver == comm.rank:
            message = np.empty(WIDTH, np.int64)
            comm.recv(message, rank)
            rows[k + 1] = _decode(message)
    return rows


def _encode(shape, dtype) -> np.ndarray:
    if str(dtype) not in DTYPES or len(shape) > WIDTH - 2:
        raise ValueError(f"an activation of row shape {tuple(shape)} and dtype {dtype} cannot "
                         f"cross a stage boundary (dtypes {DTYPES}, at most {WIDTH - 2} axes)")
    message = np.zeros(WIDTH, np.int64)
    message[:2] = DTYPES.index(str(dtype)), len(shape)
    message[2:2 + len(shape)] = shape
    return message


def _decode(message) -> tuple[tuple, str]:
    ndim = int(message[1])
    return tuple(int(d) for d in message[2:2 + ndim]), DTYPES[int(message[0])]
