"""Fixtures for the optimizer tests: the array module of the test's device."""

import pytest

from scratchpar import backend


@pytest.fixture
def xp(device):
    """The array module under test: NumPy on the CPU, the double's (or CuPy's) on a device."""
    return backend.xp_default()
