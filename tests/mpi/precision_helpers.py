"""Mixed precision under test: a task's model in 16 bits stepped through fp32 masters, the
masters a strategy holds, and how closely two runs' masters must move alike."""

import numpy as np
from device_helpers import host

from scratchpar import backend
from scratchpar.autograd.precision import dtype_of
from scratchpar.optim import SGD
from scratchpar.optim.mixed import MixedPrecision
from scratchpar.optim.scaler import LossScaler

# Norm-wise relative error of the masters' moves: a few units of each format's rounding
# (fp16 2⁻¹¹, bf16 2⁻⁸), summed over a backward's products and three steps.
TOLERANCE = {"fp16": 2e-2, "bf16": 1e-1}


def mixed(task, precision: str, scale: float, **sgd):
    """``task``'s model in 16 bits, and the factory of what steps it: SGD (with momentum, or
    ``sgd``'s settings) through fp32 masters."""
    task.model.to_dtype(dtype_of(precision, backend.xp_default()))
    task.scaler = LossScaler(scale=scale) if precision == "fp16" else None
    settings = sgd or {"lr": 0.1, "momentum": 0.9}
    return lambda params: MixedPrecision(SGD(params, **settings), task.scaler)


def fp32_start(low, full) -> list:
    """``full``'s model takes ``low``'s 16-bit weights, in fp32: one start for a 16-bit run and
    its fp32 spec. Returns that start on the host, in float64."""
    for p, q in zip(full.model.parameters(), low.model.parameters()):
        p.data[...] = q.data.astype(np.float32)
    return [host(p.data).astype(np.float64) for p in full.model.parameters()]


def masters(strategy):
    """Each parameter's fp32 master, whole, in the one-device model's order (a sharded
    strategy gathers them: its checkpoint's layout-free state)."""
    state = strategy.state_dict()  # rank 0's (every strategy's is a collective)
    optim = (state if strategy.comm is None else strategy.comm.allgather_obj(state)[0])["optim"]
    count = sum(key.startswith("master.") for key in optim)
    return [host(optim[f"master.{i}"]).astype(np.float64) for i in range(count)]


def assert_moved_alike(got, want, start, precision: str) -> None:
    """The masters ``got`` moved from ``start`` as ``want`` did, within ``TOLERANCE``
    norm-wise, a master for every parameter."""
    moved = [m - s for m, s in zip(got, start)]
    wanted = [m - s for m, s in zip(want, start)]
    assert len(moved) == len(wanted) == len(start)
    error = np.sqrt(sum(np.sum((a - b) ** 2) for a, b in zip(moved, wanted)))
    assert error <= TOLERANCE[precision] * np.sqrt(sum(np.sum(b**2) for b in wanted)), error


def available(precision: str) -> str:
    """``precision``, or fp16 where the device has no bfloat16 (CuPy, and the double)."""
    return precision if backend.xp_default() is np else "fp16"
