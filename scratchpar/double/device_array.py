"""DeviceArray: a NumPy array kept behind a wall, the way a CuPy array sits on the GPU.

It does what a CuPy array does and refuses what CuPy refuses, so that the engine's GPU mistakes
show up on a CPU-only machine:

- NumPy never reads it implicitly (``np.asarray``, a NumPy function or ufunc on it);
- it does not mix with NumPy arrays in one operation (host and device memory);
- reading a value on the host (``float``, ``int``, ``bool``, ``.item()``, ``.get()``) is a sync,
  recorded with the engine line that caused it;
- MPI may read it only where the simulated library is CUDA-aware and the stream is synchronized.
  Elsewhere a buffer must be staged through host memory first.

The wall stands for every caller, tests included, as CuPy's does: a test reads a device array
with ``.get()`` (``tests/device_helpers.host``). A NumPy function or ufunc called on device
arrays outside the engine runs on the device, as CuPy's ``__array_function__`` makes it; in the
engine it is refused, because CuPy lacks some of NumPy's functions.
"""

from __future__ import annotations

import functools
import operator
from typing import NamedTuple

import numpy as np

from scratchpar.double import tally


class DoubleError(TypeError):
    """The engine did something a GPU would punish (or crash on)."""


class MPIReads:
    """Whether the simulated MPI library reads device memory (a CUDA-aware build)."""

    device = False


class Flags(NamedTuple):
    c_contiguous: bool
    f_contiguous: bool
    owndata: bool


class DeviceArray:
    """An n-dimensional array 'on the device' (see the module docstring)."""

    __slots__ = ("_a",)
    __hash__ = None

    def __init__(self, host: np.ndarray):
        self._a = host

    # -- what NumPy must not do implicitly ------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        _refuse("np.asarray on a device array (an implicit copy to the host)", "xp or .get()")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and any(isinstance(v, np.generic) for v in inputs) \
                and not any(isinstance(v, np.ndarray) for v in (*inputs, *kwargs.values())):
            return wrap(  # a NumPy scalar's operator: CuPy computes it on the device
                ufunc(*_device(inputs), **_device(kwargs)))
        _refuse_in_engine(f"the NumPy ufunc {ufunc.__name__} on a device array",
                          "xp = get_array_module(x)")
        tally.Kernels.queued = True
        return wrap(getattr(ufunc, method)(*_device(inputs), **_device(kwargs)))

    def __array_function__(self, func, types, args, kwargs):
        _refuse_in_engine(f"the NumPy function {func.__name__} on a device array",
                          "xp = get_array_module(x)")
        tally.Kernels.queued = True
        return wrap(func(*_device(args), **_device(kwargs)))

    @property
    def __cuda_array_interface__(self):
        """The device pointer, for a CUDA-aware MPI (the simulated one reads it in place)."""
        if not MPIReads.device:
            raise DoubleError("a device buffer was handed to MPI, which cannot read device "
                              "memory: stage it through the host (or the CUDA-aware override "
                              "is wrong here)")
        if tally.Kernels.queued:
            raise DoubleError("a device buffer was handed to MPI with kernels still queued on "
                              "its stream: synchronize (backend.sync()) before the call")
        return {"shape": self._a.shape, "typestr": self._a.dtype.str, "version": 3,
                "data": (self._a.ctypes.data, False), "strides": self._a.strides}

    # -- explicit transfers and host reads ------------------------------------------------------
    def get(self, out=None):
        """A host copy (into ``out`` if given, pinned or not): a sync and a copy."""
        pinned = out is not None and getattr(out, "pinned", False)
        tally.copied(self._a.nbytes, to_host=True, pinned=pinned)
        if out is None:
            return self._a.copy()
        if type(out) is DeviceArray:
            raise DoubleError(".get(out=…) takes a host array")
        np.copyto(out, self._a)
        return out

    def set(self, host) -> None:
        """Copy the host array ``host`` in (shapes must match)."""
        if type(host) is DeviceArray or not isinstance(host, np.ndarray):
            raise DoubleError(f".set() takes a host array, got {type(host).__name__}")
        if host.shape != self._a.shape:
            raise ValueError(f"shape mismatch: {host.shape} into {self._a.shape}")
        tally.copied(host.nbytes, to_host=False, pinned=getattr(host, "pinned", False))
        np.copyto(self._a, host)

    def item(self):
        tally.host_sync("item")
        return self._a.item()

    def tolist(self):
        tally.host_sync("tolist")
        return self._a.tolist()

    def __float__(self):
        tally.host_sync("float")
        return float(self._a)

    def __int__(self):
        tally.host_sync("int")
        return int(self._a)

    def __bool__(self):
        tally.host_sync("bool")
        return bool(self._a)

    @property
    def flags(self):
        """CuPy's three flags; NumPy's others (``writeable``, ``aligned``…) a GPU array lacks."""
        return Flags(self._a.flags.c_contiguous, self._a.flags.f_contiguous, self._a.flags.owndata)

    @property
    def data(self):
        raise DoubleError("device memory has no host view (.data); use .get()")

    @property
    def ctypes(self):
        raise DoubleError("device memory has no host pointer (.ctypes); use .get()")

    # -- everything else is NumPy's behaviour, on device arrays only ----------------------------
    def __getattr__(self, name):
        if name.startswith("__"):  # never lend NumPy's protocols (__dlpack__, buffers, …)
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return wrap(attr)
        return functools.partial(_method, attr)

    def __getitem__(self, key):
        return wrap(self._a[_device(key)])

    def __setitem__(self, key, value):
        tally.Kernels.queued = True
        self._a[_device(key)] = _device(value)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (wrap(row) for row in self._a)

    def __repr__(self):
        return f"DeviceArray({self._a!r})"

    def __copy__(self):
        return wrap(self._a.copy())

    def __deepcopy__(self, memo):
        return wrap(self._a.copy())

    def __reduce__(self):  # pickling copies to the host and back, as CuPy's does
        tally.copied(self._a.nbytes, to_host=True, pinned=False)
        return (_unpickle, (self._a.copy(),))


def _method(bound, *args, **kwargs):
    tally.Kernels.queued = True
    return wrap(bound(*_device(args), **_device(kwargs)))


def _unpickle(host):
    return DeviceArray(host)


def wrap(x):
    """NumPy results as device values: arrays and scalars become (0-d) DeviceArrays, as CuPy's
    reductions return 0-d arrays, not host scalars."""
    if isinstance(x, np.ndarray):
        tally.Kernels.queued = True
        return DeviceArray(x)
    if isinstance(x, np.generic):
        tally.Kernels.queued = True
        return DeviceArray(np.asarray(x))
    if isinstance(x, (tuple, list)):
        return type(x)(wrap(v) for v in x)
    return x


def _device(x):
    """Operands for NumPy: device arrays unwrapped, host arrays refused (from the engine)."""
    if type(x) is DeviceArray:
        return x._a
    if isinstance(x, np.ndarray):
        _refuse("a NumPy array in an operation on device arrays",
                "xp.asarray(…) to move it to the device first")
    if isinstance(x, (tuple, list)):
        return type(x)(_device(v) for v in x)
    if isinstance(x, dict):
        return {k: _device(v) for k, v in x.items()}
    return x


def _host(x):
    """Operands for an explicit NumPy call made outside the engine: everything to the host."""
    if type(x) is DeviceArray:
        return x._a
    if isinstance(x, (tuple, list)):
        return type(x)(_host(v) for v in x)
    if isinstance(x, dict):
        return {k: _host(v) for k, v in x.items()}
    return x


def _refuse(what: str, instead: str) -> None:
    raise DoubleError(f"{what} at {tally.caller()[1]}: a GPU refuses this; use {instead}")


def _refuse_in_engine(what: str, instead: str) -> None:
    if tally.from_engine():
        _refuse(what, instead)


OPERANDS = (DeviceArray, np.ndarray, np.generic, int, float, complex)


def _binary(op):
    def method(self, other):
        if not isinstance(other, OPERANDS):
            return NotImplemented  # let the other operand (a Tensor, say) answer
        return wrap(op(self._a, _device(other)))
    return method


def _reflected(op):
    def method(self, other):
        return wrap(op(_device(other), self._a))
    return method


def _inplace(op):
    def method(self, other):
        tally.Kernels.queued = True
        op(self._a, _device(other))
        return self
    return method


def _unary(op):
    def method(self):
        return wrap(op(self._a))
    return method


_BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
           "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
           "pow": operator.pow, "matmul": operator.matmul, "and": operator.and_,
           "or": operator.or_, "xor": operator.xor, "lshift": operator.lshift,
           "rshift": operator.rshift}
for _name, _op in _BINARY.items():
    setattr(DeviceArray, f"__{_name}__", _binary(_op))
    setattr(DeviceArray, f"__r{_name}__", _reflected(_op))
    setattr(DeviceArray, f"__i{_name}__", _inplace(getattr(operator, f"i{_name}")))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(DeviceArray, f"__{_name}__", _binary(getattr(operator, _name)))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(DeviceArray, f"__{_name}__", _unary(getattr(operator, _name)))
