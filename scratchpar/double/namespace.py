"""The double's array module: NumPy's functions on device arrays, under CuPy's rules.

``xp.zeros``, ``xp.exp``, ``xp.linalg.norm``… are NumPy's, wrapped: device arrays in, device
arrays out (a reduction gives a 0-d array, as on CuPy), and a host array among the operands is
refused. Only ``xp.asarray``/``xp.array`` take host data: they are the explicit copy to the
device. ``xp.add.at`` and the other ``ufunc.at`` are refused in the engine: CuPy's add with
atomics, in no fixed order (``scratchpar/scatter.py``).
"""

from __future__ import annotations

import functools
import types

import numpy as np

from scratchpar.double import tally
from scratchpar.double.device_array import DeviceArray, DoubleError, _device, _host, wrap

UPLOADS = ("asarray", "array")  # the functions that copy host data to the device


class Namespace(types.ModuleType):
    """A module whose functions are ``source``'s, wrapped (``xp`` itself, ``xp.linalg``)."""

    def __init__(self, name: str, source):
        super().__init__(name)
        self._source = source

    def __getattr__(self, name):
        obj = getattr(self._source, name)
        if name == "ndarray":
            obj = DeviceArray
        elif isinstance(obj, np.ufunc):
            obj = Ufunc(obj)
        elif callable(obj) and not isinstance(obj, type):
            obj = _wrapped(obj, name in UPLOADS)
        setattr(self, name, obj)  # cached: the next lookup is a plain attribute
        return obj


class Ufunc:
    """A NumPy ufunc on device arrays, its methods (``at``, ``reduce``, ``outer``…) included."""

    def __init__(self, ufunc: np.ufunc):
        self._ufunc, self.__name__ = ufunc, ufunc.__name__

    def __call__(self, *args, **kwargs):
        return _call(self._ufunc, args, kwargs)

    def __getattr__(self, name):
        attr = getattr(self._ufunc, name)
        if name == "at" and tally.from_engine():
            raise DoubleError(f"{self.__name__}.at on device arrays at {tally.caller()[1]}: on a "
                              "GPU it adds with atomics, in no fixed order, and no two runs agree "
                              "bit for bit; use scratchpar.scatter.scatter_add")
        return (lambda *args, **kwargs: _call(attr, args, kwargs)) if callable(attr) else attr


def _call(fn, args, kwargs=None):
    tally.Kernels.queued = True
    return wrap(fn(*_device(args), **_device(kwargs or {})))


def _wrapped(fn, uploads: bool):
    if uploads:
        def upload(obj, *args, **kwargs):
            host = isinstance(obj, np.ndarray)
            if host:
                tally.copied(obj.nbytes, to_host=False, pinned=getattr(obj, "pinned", False))
            elif not isinstance(obj, DeviceArray):
                tally.scalar_uploaded()
            out = fn(_host(obj), *_device(args), **_device(kwargs))
            if host and np.shares_memory(out, obj):
                out = out.copy()  # device memory is its own: never an alias of the host's
            return wrap(np.asarray(out))
        return functools.wraps(fn)(upload)
    return functools.wraps(fn)(lambda *args, **kwargs: _call(fn, args, kwargs))


class PinnedArray(np.ndarray):
    """Host memory the device copies to and from directly (page-locked on a real GPU)."""

    pinned = True


def empty_pinned(shape, dtype=np.float32) -> np.ndarray:
    """A host array in pinned memory (``cupyx.empty_pinned``)."""
    out = np.empty(shape, dtype).view(PinnedArray)
    tally.pinned_alloc(out.nbytes)
    return out


def argsort(a, axis=-1, kind=None):
    """Indices that sort ``a``, equal elements in their order (CuPy's sort is always stable)."""
    return _call(np.argsort, (a,), {"axis": axis, "kind": "stable"})


def add_runs(flat, keys, order, values, width) -> None:
    """The stand-in for ``scratchpar/scatter.py``'s CUDA kernel: row ``keys[k]`` of ``flat`` (rows
    of ``width``) += row ``order[k]`` of ``values``, ``keys`` sorted, each run added in order."""
    if not all(type(a) is DeviceArray for a in (flat, keys, order, values)):
        raise DoubleError("add_runs takes device arrays")
    tally.Kernels.queued = True
    unsorted = np.empty_like(keys._a)
    unsorted[order._a] = keys._a  # (N,) each row's key where the row is: the same order of sums
    np.add.at(flat._a.reshape(-1, width), unsorted, values._a.reshape(-1, width))


def asnumpy(x, out=None) -> np.ndarray:
    """A host copy of ``x`` (``cupy.asnumpy``)."""
    if type(x) is DeviceArray:
        return x.get(out=out)
    return np.asarray(x)
