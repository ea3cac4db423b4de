"""Whether the MPI library reads GPU memory itself (CUDA-aware), or buffers go through the host."""

from __future__ import annotations

import ctypes
import functools
import os
import sys

from scratchpar.comm.errors import CommError


@functools.cache
def log_staging_once() -> None:
    print("scratchpar: MPI is not CUDA-aware; GPU buffers are staged through host memory "
          "(SCRATCHPAR_CUDA_AWARE=1 overrides)", file=sys.stderr, flush=True)


@functools.cache
def detect_cuda_aware() -> bool:
    """``$SCRATCHPAR_CUDA_AWARE`` (0/1) if set, else the library's ``MPIX_Query_cuda_support``."""
    env = os.environ.get("SCRATCHPAR_CUDA_AWARE")
    if env in ("0", "1"):
        return env == "1"
    if env is not None:
        raise CommError(f"SCRATCHPAR_CUDA_AWARE must be 0 or 1, got {env!r}")
    try:
        with open("/proc/self/maps") as maps:  # the MPI library this process loaded (Linux)
            libs = {line.split()[-1] for line in maps if "libmpi" in line and ".so" in line}
    except OSError:
        return False
    for path in sorted(libs):
        query = getattr(ctypes.CDLL(path), "MPIX_Query_cuda_support", None)
        if query is not None:
            return bool(query())
    return False
