"""An array as mpi4py sees a message: its buffer spec and MPI datatype, and a pending request
with the step that ends it."""

from __future__ import annotations

import functools

from mpi4py import MPI

from scratchpar.comm.errors import CommError
from scratchpar.comm.watchdog import Wait, made


class Request:
    """A pending message: the MPI request, what it is for, and what to do once it completes
    (copy a staged receive to the device, give staging buffers back)."""

    __slots__ = ("mpi", "_wait", "finish")

    def __init__(self, mpi_request, wait: Wait | tuple, finish=None):
        self.mpi, self._wait, self.finish = mpi_request, wait, finish

    @property
    def wait(self) -> Wait:
        """What the message is for (its fields alone until asked for: ``watchdog.made``)."""
        self._wait = made(self._wait)
        return self._wait

    def complete(self) -> None:
        """Run the finish step, once however often the request is waited on."""
        finish, self.finish = self.finish, None
        if finish is not None:
            finish()


def check_contiguous(buf) -> None:
    if not buf.flags.c_contiguous:
        raise CommError(f"message buffers must be C-contiguous; got shape {buf.shape} with "
                        f"strides {buf.strides} (use xp.ascontiguousarray)")


def spec(buf):
    """mpi4py's buffer spec: the array, its element count and its MPI datatype."""
    return None if buf is None else [buf, buf.size, mpi_type(buf.dtype)]


@functools.cache
def mpi_type(dtype):
    """The predefined MPI datatype of a NumPy dtype (float32 → MPI_FLOAT, …). bfloat16, which
    MPI does not name, travels as its 16-bit words: moved intact, added by the engine's own
    collectives (in NumPy), never by MPI's (:func:`reducible`)."""
    if dtype.name == "bfloat16":
        return MPI.UINT16_T
    try:
        return MPI.Datatype.fromcode(dtype.char)
    except (KeyError, ValueError):
        raise CommError(f"no MPI datatype for dtype {dtype}") from None


def reducible(buf) -> None:
    """Refuse a buffer that MPI's own reductions would add wrongly: bfloat16 goes to MPI as
    16-bit integers (:func:`mpi_type`)."""
    if buf.dtype.name == "bfloat16":
        raise CommError("MPI's own reductions cannot add bfloat16 (MPI names no such type): "
                        "reduce it with a hand-written algorithm (algorithm='auto')")
