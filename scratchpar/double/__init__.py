"""The device double: CuPy's behaviour on the CPU, so CI catches GPU mistakes (device_array.py).

``backend.set_device("double")`` makes it the device: models, batches and gradients live in
:class:`DeviceArray`, and this package is their array module (``xp``), as ``cupy`` is for CuPy
arrays. Names it does not define are NumPy's, wrapped (namespace.py).
"""

import sys

import numpy as np

from scratchpar.double import cuda, tally
from scratchpar.double.device_array import DeviceArray, DoubleError, MPIReads
from scratchpar.double.namespace import (
    Namespace,
    add_runs,
    argsort,
    asnumpy,
    empty_pinned,
)
from scratchpar.double.tally import watch

ndarray = DeviceArray
linalg = Namespace("scratchpar.double.linalg", np.linalg)
random = Namespace("scratchpar.double.random", np.random)
_NUMPY = Namespace(__name__, np)


def get_array_module(*arrays):
    """This package, the double's array module, if any argument is a device array, else NumPy
    (``cupy.get_array_module``)."""
    return sys.modules[__name__] if any(type(a) is DeviceArray for a in arrays) else np


__all__ = ["DeviceArray", "DoubleError", "MPIReads", "add_runs", "argsort", "asnumpy", "cuda",
           "empty_pinned", "get_array_module", "linalg", "ndarray", "random", "tally", "watch"]


def __getattr__(name: str):
    return getattr(_NUMPY, name)
