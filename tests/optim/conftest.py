"""Fixtures for the optimizer tests: the array modules to run on (NumPy, and CuPy with a GPU)."""

import numpy as np
import pytest


def _array_modules():
    modules = [np]
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            modules.append(cupy)
    except Exception:  # no CuPy, or no usable GPU: NumPy only
        pass
    return modules


@pytest.fixture(scope="session", params=_array_modules(), ids=lambda m: m.__name__)
def xp(request):
    """The array module under test."""
    return request.param
