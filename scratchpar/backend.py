"""The array backend: NumPy on the CPU, CuPy on a GPU, or the device double; chosen per process."""

from __future__ import annotations

import sys

import numpy as np

from scratchpar import double, mps

DEVICES = ("cpu", "cuda", "double")  # double: CuPy's rules on the CPU, for tests (double/)
_device = "cpu"
_xp = np


class BackendError(RuntimeError):
    """The requested device cannot be used in this process."""


def _cupy():
    """CuPy, imported only when a rank asks for the GPU: its CUDA libraries map about 1 GiB of
    address space, which a CPU rank held to a memory budget (``batch fits``) cannot spare."""
    try:
        import cupy
    except ImportError as e:  # CuPy is optional: the CPU path needs only NumPy.
        raise BackendError("--device cuda needs CuPy: pip install 'scratchpar[cuda12]'") from e
    return cupy


def set_device(device: str, local_rank: int = 0, local_size: int = 1) -> None:
    """Select ``"cpu"`` (NumPy), ``"cuda"`` (CuPy) or ``"double"``. A rank uses GPU
    ``local_rank % count``, on a stream of its own: ranks that share one GPU then queue their
    kernels apart instead of serializing on the legacy default stream. Where a node's
    ``local_size`` ranks outnumber its GPUs, MPS runs their work in one context, started before
    CUDA is (:func:`scratchpar.mps.share`); the node's first rank says what it did."""
    global _device, _xp
    if device not in DEVICES:
        raise BackendError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
    xp = _cupy() if device == "cuda" else {"cpu": np, "double": double}[device]
    if xp is not np:
        known = mps.visible() if device == "cuda" else None
        said = mps.share(local_rank, local_size, known) if known else None
        count = xp.cuda.runtime.getDeviceCount()
        if count == 0:
            raise BackendError("--device cuda: CuPy sees no GPU")
        xp.cuda.Device(local_rank % count).use()
        xp.cuda.Stream(non_blocking=True).use()
        if device == "cuda" and known is None and local_size > count and local_rank == 0:
            said = mps.note(local_size, count)
        if said:
            print(said, file=sys.stderr, flush=True)
    _device, _xp = device, xp


def device() -> str:
    """The device selected by :func:`set_device` (``"cpu"`` until then)."""
    return _device


def xp_default():
    """The array module of the selected device."""
    return _xp


def get_array_module(*arrays):
    """``cupy`` (or the double) if any argument is one of its arrays, else ``numpy``."""
    for a in arrays:
        if type(a) is double.ndarray:
            return double
        cupy = sys.modules.get("cupy")  # no CuPy array exists before CuPy is imported
        if cupy is not None and isinstance(a, cupy.ndarray):
            return cupy
    return np


def to_host(x) -> np.ndarray:
    """A NumPy array with the contents of ``x`` (no copy if it already is one)."""
    if isinstance(x, np.ndarray):
        return x
    xp = get_array_module(x)
    return np.asarray(x) if xp is np else xp.asnumpy(x)


def to_device(x, dtype=None):
    """``x`` as an array of the selected device, optionally cast to ``dtype``."""
    return _xp.asarray(x, dtype=dtype)


def empty_pinned(shape, dtype):
    """A host array the device copies to and from directly (page-locked where there is a GPU)."""
    if _device == "cuda":
        import cupyx

        return cupyx.empty_pinned(shape, dtype)
    return _xp.empty_pinned(shape, dtype) if _xp is double else np.empty(shape, dtype)


def sync() -> None:
    """Wait for the work queued on this rank's stream; a no-op on the CPU."""
    if _xp is not np:
        _xp.cuda.get_current_stream().synchronize()


def rng(seed: int, *stream: int) -> np.random.Generator:
    """A host generator for ``seed``; extra integers (a rank, a step) give independent streams."""
    return np.random.default_rng([seed, *stream])
