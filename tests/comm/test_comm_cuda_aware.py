"""CUDA-aware MPI detection: the environment override, read before asking the library."""

import pytest

from scratchpar.comm.cuda_aware import detect_cuda_aware
from scratchpar.comm.errors import CommError

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

