"""How a message's buffer reaches MPI: as it is, directly from the device, or through pinned memory.

A host array goes to MPI as it is. A device array goes one of two ways (DESIGN.md §2):

- **CUDA-aware** MPI reads and writes device memory itself, but outside the stream's order: so
  the stream is synchronized first, and no queued kernel still writes a buffer MPI is to send,
  or reads one MPI is to overwrite.
- Otherwise the message is **staged** through a pinned host buffer borrowed from the
  communicator's workspace. A send copies device → pinned (a blocking copy, which waits for the
  stream) and MPI reads the pinned copy. A receive lets MPI write pinned memory, then copies
  pinned → device. Pinned (page-locked) memory is what the GPU's copy engines read and write
  directly: a pageable array would be copied once more through the driver's own buffer.

A collective of a few kilobytes stages its buffer once instead (:func:`twin`): copied to pinned
memory, reduced there by the host algorithm, copied back. Staging each step's message pays a
copy and a stream wait per step, which at those sizes is the whole cost.

A borrowed buffer goes back only when its message completes, a send's once MPI has read it, a
receive's once its copy to the device is queued. That copy may still be reading it (from pinned
memory, CuPy's ``set`` does not wait), so it goes back *settling*: no receive reuses it before the
stream is synchronized (workspace.py).
"""

from __future__ import annotations

import numpy as np

from scratchpar import backend
from scratchpar.comm.cuda_aware import STAGING_NOTE, log_once


def outgoing(buf, cuda_aware: bool, workspace):
    """``(what MPI reads, finish)`` for sending ``buf``; ``finish()`` (or ``None``) once sent."""
    if direct(buf, cuda_aware):
        return buf, None
    host, whole = workspace.take_pinned(buf.shape, buf.dtype)
    buf.get(out=host)  # blocks until the stream is done: every queued copy has run
    workspace.settle()
    return host, lambda: workspace.give_pinned(whole)


def incoming(buf, cuda_aware: bool, workspace):
    """``(what MPI writes, finish)`` for receiving into ``buf``; ``finish()`` (or ``None``) once
    the message has arrived."""
    if direct(buf, cuda_aware):
        return buf, None
    host, whole = workspace.take_pinned(buf.shape, buf.dtype, settled=True)

    def finish():
        buf.set(host)
        workspace.give_pinned(whole, settling=True)

    return host, finish


def twin(buf, workspace):
    """``(host, back)``: a pinned copy of the device array ``buf``, and the step that copies
    ``host`` back into ``buf`` and returns its memory to ``workspace``'s pool."""
    host, whole = workspace.take_pinned(buf.shape, buf.dtype)
    buf.get(out=host)  # blocks until the stream is done, as a staged send's copy does
    workspace.settle()

    def back():
        buf.set(host)
        workspace.give_pinned(whole, settling=True)

    return host, back


def direct(buf, cuda_aware: bool) -> bool:
    """Whether MPI takes ``buf`` itself: a host array, or device memory that a CUDA-aware MPI
    reads once the stream is synchronized. Otherwise the message is staged (noted once)."""
    if isinstance(buf, np.ndarray):
        return True
    if cuda_aware:
        backend.sync()
        return True
    log_once(STAGING_NOTE)
    return False
