"""The double's array module: NumPy's functions on device arrays, under CuPy's rules.

``xp.zeros``, ``xp.exp``, ``xp.add.at``, ``xp.linalg.norm``… are NumPy's, wrapped: device arrays
in, device arrays out (a reduction gives a 0-d array, as on CuPy), and a host array among the
operands is refused where the engine passes it. Only ``xp.asarray``/``xp.array`` take host data:
they are the explicit copy to the device.
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


def scatter_add(target, indices, values) -> None:
    """``target[indices] += values``, repeated indices summed (``cupyx.scatter_add``)."""
    if type(target) is not DeviceArray:
        raise DoubleError("scatter_add's target must be a device array")
    tally.Kernels.queued = True
    np.add.at(target._a, _device(indices), _device(values))


def asnumpy(x, out=None) -> np.ndarray:
    """A host copy of ``x`` (``cupy.asnumpy``)."""
    if type(x) is DeviceArray:
        return x.get(out=out)
    return np.asarray(x)
