"""CUDA-aware MPI detection: the environment override, read before asking the library and
logged once; a wrong override fails with an error that names it, when MPI refuses the buffer
and when a message fails inside the library."""

import numpy as np
import pytest
from device_helpers import on_device

from scratchpar.comm import cuda_aware
from scratchpar.comm.cuda_aware import detect_cuda_aware, failed_directly, log_once
from scratchpar.comm.errors import CommError
from scratchpar.comm.mpi import Communicator

detect = detect_cuda_aware.__wrapped__  # the logic under functools.cache, run afresh each call


@pytest.mark.parametrize("raw, want", [("1", True), ("0", False)])
def test_the_environment_overrides_the_library(monkeypatch, raw, want):
    monkeypatch.setenv("SCRATCHPAR_CUDA_AWARE", raw)
    assert detect() is want


@pytest.mark.parametrize("raw", ["yes", "true", "", " 1", "2"])
def test_any_other_value_is_a_clear_error(monkeypatch, raw):
    monkeypatch.setenv("SCRATCHPAR_CUDA_AWARE", raw)
    with pytest.raises(CommError, match=r"SCRATCHPAR_CUDA_AWARE must be 0 or 1, got"):
        detect()



def test_the_override_is_logged_once(monkeypatch, capsys):
    monkeypatch.setenv("SCRATCHPAR_CUDA_AWARE", "1")
    log_once.cache_clear()
    assert detect() and detect()
    err = capsys.readouterr().err
    assert err.count("SCRATCHPAR_CUDA_AWARE=1 overrides the MPI library") == 1
    assert "GPU buffers go to MPI directly" in err


def test_a_wrong_override_fails_naming_it(monkeypatch, device):
    if device != "double":
        pytest.skip("the double's MPI refuses device memory")
    monkeypatch.setenv("SCRATCHPAR_CUDA_AWARE", "1")
    comm = Communicator(cuda_aware=True, name="claims")
    with pytest.raises(CommError, match="SCRATCHPAR_CUDA_AWARE=1 says that the MPI library is "
                                        "CUDA-aware"):
        comm.sendrecv(on_device(np.ones(3)), 0, on_device(np.zeros(3)), 0)


def test_a_message_failed_under_a_wrong_claim_names_it(monkeypatch, device):
    monkeypatch.setenv("SCRATCHPAR_CUDA_AWARE", "1")
    monkeypatch.setattr(cuda_aware, "library_cuda_aware", lambda: False)
    assert failed_directly(False) == ""
    if device == "cpu":  # host buffers: the claim cannot be what failed
        assert failed_directly(True) == ""
    else:
        assert "read device memory as host memory. Device buffers go to MPI directly because " \
               "SCRATCHPAR_CUDA_AWARE=1 says" in failed_directly(True)
