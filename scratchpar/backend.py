"""The array backend: NumPy on the CPU or CuPy on a GPU, chosen once per process."""

from __future__ import annotations

import numpy as np

try:
    import cupy
except ImportError:  # CuPy is optional: the CPU path needs only NumPy.
    cupy = None

_device = "cpu"


class BackendError(RuntimeError):
    """The requested device cannot be used in this process."""


def set_device(device: str, local_rank: int = 0) -> None:
    """Select ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy); a rank uses GPU ``local_rank % count``."""
    global _device
    if device not in ("cpu", "cuda"):
        raise BackendError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cuda":
        if cupy is None:
            raise BackendError("--device cuda needs CuPy: pip install 'scratchpar[cuda12]'")
        count = cupy.cuda.runtime.getDeviceCount()
        if count == 0:
            raise BackendError("--device cuda: CuPy sees no GPU")
        cupy.cuda.Device(local_rank % count).use()
    _device = device


def device() -> str:
    """The device selected by :func:`set_device` (``"cpu"`` until then)."""
    return _device


def xp_default():
    """The array module of the selected device."""
    return cupy if _device == "cuda" else np


def get_array_module(*arrays):
    """``cupy`` if any argument is a CuPy array, else ``numpy``."""
    if cupy is not None:
        return cupy.get_array_module(*arrays)
    return np


def to_host(x) -> np.ndarray:
    """A NumPy array with the contents of ``x`` (no copy if it already is one)."""
    if cupy is not None and isinstance(x, cupy.ndarray):
        return cupy.asnumpy(x)
    return np.asarray(x)


def to_device(x, dtype=None):
    """``x`` as an array of the selected device, optionally cast to ``dtype``."""
    xp = xp_default()
    return xp.asarray(x, dtype=dtype)


def sync() -> None:
    """Wait for queued GPU work on the current stream; a no-op on the CPU."""
    if _device == "cuda":
        cupy.cuda.get_current_stream().synchronize()


def scatter_add(target, indices, values) -> None:
    """``target[indices] += values`` with repeated indices summed (unbuffered)."""
    xp = get_array_module(target)
    if xp is np:
        np.add.at(target, indices, values)
    else:
        import cupyx

        cupyx.scatter_add(target, indices, values)


def rng(seed: int, *stream: int) -> np.random.Generator:
    """A host generator for ``seed``; extra integers (a rank, a step) give independent streams."""
    return np.random.default_rng([seed, *stream])
