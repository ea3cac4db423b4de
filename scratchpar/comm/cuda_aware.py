"""Whether the MPI library reads GPU memory itself (CUDA-aware), or buffers go through the host."""

from __future__ import annotations

import ctypes
import functools
import os
import sys

import numpy as np
from mpi4py import MPI

from scratchpar import backend
from scratchpar.comm.errors import CommError

ENV = "SCRATCHPAR_CUDA_AWARE"
STAGING_NOTE = (f"scratchpar: MPI is not CUDA-aware; GPU buffers are staged through pinned host "
                f"memory ({ENV}=1 overrides)")


@functools.cache
def log_once(message: str) -> None:
    """Print ``message`` to stderr the first time this process asks to, on world rank 0 only:
    every rank loads the same library and decides alike, so the job says it once."""
    if MPI.COMM_WORLD.Get_rank() == 0:
        print(message, file=sys.stderr, flush=True)


@functools.cache
def detect_cuda_aware() -> bool:
    """``$SCRATCHPAR_CUDA_AWARE`` (0/1) if set (logged once), else the library's own answer."""
    env = os.environ.get(ENV)
    if env is None:
        return library_cuda_aware()
    if env not in ("0", "1"):
        raise CommError(f"{ENV} must be 0 or 1, got {env!r}")
    route = "go to MPI directly" if env == "1" else "are staged through pinned host memory"
    log_once(f"scratchpar: {ENV}={env} overrides the MPI library, which reports "
             f"{'' if library_cuda_aware() else 'no '}CUDA support: GPU buffers {route}")
    return env == "1"


@functools.cache
def library_cuda_aware() -> bool:
    """The loaded MPI library's ``MPIX_Query_cuda_support()`` (MPICH, Open MPI); False without."""
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


def refused(error: BaseException) -> str:
    """MPI's refusal of a device buffer, and the claim of CUDA-awareness that sent it there."""
    return f"MPI refused a device buffer: {error}. {_sent_directly()}"


def failed_directly(cuda_aware: bool) -> str:
    """What to add to MPI's failure of a message, where device buffers go to MPI directly and
    the library reports no CUDA support: such a library reads a device address as a host one
    and fails inside its copy (MPICH: ``process_vm_readv failed (errno 14)``)."""
    if not cuda_aware or library_cuda_aware() or backend.xp_default() is np:
        return ""
    return f"\nThe library may have read device memory as host memory. {_sent_directly()}"


def _sent_directly() -> str:
    library = library_cuda_aware()
    if os.environ.get(ENV) == "1":
        claim = f"{ENV}=1 says"
    elif library:
        claim = "the library reports (MPIX_Query_cuda_support)"
    else:
        claim = "Communicator(cuda_aware=True) says"
    return (f"Device buffers go to MPI directly because {claim} that the MPI library is "
            f"CUDA-aware (the library itself reports {'' if library else 'no '}CUDA support); "
            f"{ENV}=0 or cuda_aware=False stages them through host memory instead")
