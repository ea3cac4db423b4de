"""Moving test data to the test's device and back (``device`` fixture, tests/conftest.py)."""

from scratchpar.backend import to_device, to_host

__all__ = ["on_device", "host"]


def on_device(array, dtype=None):
    """``array`` copied to the device of this test (a NumPy array on the CPU)."""
    return to_device(array, dtype=dtype)


def host(array):
    """A NumPy copy of a device array (the array itself on the CPU)."""
    return to_host(array)
