"""The device double refuses what CuPy refuses, and counts the waits."""

import numpy as np
import pytest

from scratchpar import backend, double
from scratchpar.double import DoubleError, MPIReads, watch


def engine(source: str, **names):
    """Run ``source`` as if it were a line of the engine (module ``scratchpar.fake``)."""
    scope = {"__name__": "scratchpar.fake", "np": np, **names}
    exec(compile(source, "scratchpar/fake.py", "exec"), scope)
    return scope.get("out")


@pytest.fixture
def dev():
    return double.asarray(np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("source, what", [
    ("out = np.asarray(x)", "np.asarray"),
    ("out = np.exp(x)", "ufunc exp"),
    ("out = np.concatenate([x, x])", "function concatenate"),
    ("out = np.add.at(x, [0], 1.0)", "ufunc add"),
    ("out = xp.add.at(x, xp.asarray([0, 0]), 1.0)", "atomics"),
    ("out = x + np.ones(3)", "NumPy array in an operation"),
    ("out = np.ones(3) * x", "ufunc multiply"),
    ("x[np.array([0])] = 1.0", "NumPy array in an operation"),
])
def test_engine_code_may_not_hand_device_arrays_to_numpy(dev, source, what):
    with pytest.raises(DoubleError, match=what) as caught:
        engine(source, x=dev, xp=double)
    assert "scratchpar/fake.py:1" in str(caught.value)  # the message names the engine's line


def test_numpy_scalars_and_python_numbers_are_device_operands(dev):
    out = engine("out = np.float32(2.0) * x + 1", x=dev)
    assert type(out) is double.ndarray
    np.testing.assert_array_equal(double.asnumpy(out), 2.0 * np.arange(6.0).reshape(2, 3) + 1)


def test_reductions_stay_on_the_device_and_reading_them_is_a_counted_sync(dev):
    with watch() as seen:
        total = engine("out = x.sum()", x=dev)
        assert type(total) is double.ndarray and total.shape == ()
        assert seen.syncs == []
        value = engine("out = float(x.sum()) + x.max().item()", x=dev)
    assert value == 15.0 + 5.0
    assert seen.syncs_from() == ["float at scratchpar/fake.py:1", "item at scratchpar/fake.py:1"]


def test_tests_meet_the_wall_too_and_read_through_get(dev):
    with pytest.raises(DoubleError, match=r"np.asarray .*test_double_array.py:\d+"):
        np.testing.assert_array_equal(dev, np.arange(6.0).reshape(2, 3))
    with pytest.raises(DoubleError, match="NumPy array in an operation"):
        _ = dev + np.ones(3)
    with watch() as seen:
        np.testing.assert_array_equal(dev.get(), np.arange(6.0).reshape(2, 3))
    assert seen.to_host_bytes == dev.nbytes and seen.syncs_from() == []


def test_numpy_functions_called_by_tests_run_on_the_device(dev):
    out = np.exp(dev) + np.concatenate([dev, dev]).sum()
    assert type(out) is double.ndarray
    np.testing.assert_allclose(out.get(), np.exp(np.arange(6.0)).reshape(2, 3) + 30.0)


def test_uploads_copy_host_memory_rather_than_alias_it():
    host = np.zeros(3)
    dev = double.asarray(host)
    host[0] = 7.0
    assert double.asnumpy(dev)[0] == 0.0
    assert type(double.array(dev)) is double.ndarray


def test_device_memory_has_no_host_view(dev):
    for attribute in ("data", "ctypes"):
        with pytest.raises(DoubleError, match="host"):
            getattr(dev, attribute)
    assert not hasattr(dev, "__dlpack__") and not hasattr(dev, "__array_interface__")
    assert dev.flags.c_contiguous and not dev.T.flags.c_contiguous
    assert not hasattr(dev.flags, "writeable")  # CuPy's flags are three


def test_mpi_reads_device_memory_only_when_cuda_aware_and_synchronized(dev, monkeypatch):
    with pytest.raises(DoubleError, match="cannot read device memory"):
        _ = dev.__cuda_array_interface__
    monkeypatch.setattr(MPIReads, "device", True)
    backend.set_device("double")
    dev += 1  # a kernel queued on the stream
    with pytest.raises(DoubleError, match="synchronize"):
        _ = dev.__cuda_array_interface__
    backend.sync()
    interface = dev.__cuda_array_interface__
    assert interface["shape"] == (2, 3) and interface["typestr"] == "<f8"


def test_copies_through_pinned_memory_are_not_pageable(dev):
    pinned = double.empty_pinned((2, 3), np.float64)
    with watch() as seen:
        dev.get(out=pinned)
        dev.set(np.full((2, 3), 2.0))  # a plain (pageable) host array: counted as such
        dev.get()
    assert [c.split(" at ")[0] for c in seen.pageable_copies] == ["to device", "to host"]
    assert seen.to_host_bytes == 2 * dev.nbytes and seen.to_device_bytes == dev.nbytes
    dev.set(pinned)
    np.testing.assert_array_equal(dev.get(), np.arange(6.0).reshape(2, 3))


def test_backend_selects_the_double_as_a_device():
    backend.set_device("double")
    x = backend.to_device(np.ones(3), dtype=np.float32)
    assert backend.get_array_module(x) is double and x.dtype == np.float32
    assert backend.xp_default() is double
    assert isinstance(backend.to_host(x), np.ndarray)
    assert double.cuda.get_current_stream() is not double.cuda.Stream.null  # a rank's own
    assert backend.get_array_module(np.ones(2), 3.0) is np
