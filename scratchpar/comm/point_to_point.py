"""Point-to-point messages on NumPy/CuPy arrays: a user's on the user channel, an operation's on
the collectives' private duplicate, tagged by the operation's sequence number.

Arrays always travel through the upper-case buffer API (never pickled; buffers.py). A device
buffer that MPI cannot read is staged through host memory, message by message (staging.py).
"""

from __future__ import annotations

import os
import time

import numpy as np
from mpi4py import MPI

from scratchpar.comm import staging
from scratchpar.comm.buffers import Request, check_contiguous, mpi_type, spec
from scratchpar.comm.cuda_aware import refused
from scratchpar.comm.errors import CommError
from scratchpar.comm.waiting import QUICK_S


class PointToPoint:
    """Mixed into :class:`~scratchpar.comm.mpi.Communicator`: its channels (``_comm`` the
    user's, ``_coll`` the operations'), the operation being posted (``_op``), the record of what
    this rank last did (``_recent``) and the waits (:class:`~scratchpar.comm.waiting.Waiting`)."""

    def tag(self, number: int) -> int:
        """``number`` as a tag: folded into MPI's range 0..``tag_ub`` (MPI_TAG_UB). A tag tells
        apart the messages of one channel only, so each subsystem that names its tags (the
        pipeline's links, the parameter servers' protocol, EASGD's) posts on its own
        :meth:`dup`, and collectives on a private duplicate: equal tags there never meet."""
        return number % (self.tag_ub + 1)

    def isend(self, buf, dest: int, tag: int = 0) -> Request:
        """Start sending the contiguous array ``buf`` to ``dest``; it must not change until done."""
        comm, tag, wait = self._route(tag, "send", buf, dest)
        (send, _), finish = self._stage(buf, None)
        return Request(self._post(comm.Isend, buf, spec(send), dest, tag), wait, finish)

    def irecv(self, buf, source: int, tag: int = 0) -> Request:
        """Start receiving into the contiguous array ``buf`` from ``source``."""
        comm, tag, wait = self._route(tag, "recv", buf, source)
        (_, recv), finish = self._stage(None, buf)
        return Request(self._post(comm.Irecv, buf, spec(recv), source, tag), wait, finish)

    def send(self, buf, dest: int, tag: int = 0) -> None:
        if self._plain(buf, dest):
            self._blocking(self._comm.Isend, buf, dest, tag, "send")
        else:
            self.wait(self.isend(buf, dest, tag))

    def recv(self, buf, source: int, tag: int = 0) -> None:
        if self._plain(buf, source):
            self._blocking(self._comm.Irecv, buf, source, tag, "recv")
        else:
            self.wait(self.irecv(buf, source, tag))

    def sendrecv(self, sendbuf, dest: int, recvbuf, source: int, tag: int = 0) -> None:
        """Send to ``dest`` and receive from ``source`` at once (safe in a ring: no deadlock)."""
        self.wait_all([self.irecv(recvbuf, source, tag), self.isend(sendbuf, dest, tag)])

    def exchange(self, sendbuf: np.ndarray, recvbuf: np.ndarray, peer: int) -> None:
        """Inside an operation (:meth:`enter`), swap two contiguous host arrays of one dtype
        with ``peer``: both posted at once on the operation's channel and polled for up to
        ``QUICK_S``, as a plain message is (:meth:`_blocking`); only a longer wait goes through
        :meth:`wait_all` and its records. A step of recursive doubling, the collectives'
        small-buffer path."""
        op, channel, datatype = self._op, self._coll, mpi_type(sendbuf.dtype)
        tag = self.tag(op.seq)
        mpi = [channel.Irecv([recvbuf, datatype], peer, tag),
               channel.Isend([sendbuf, datatype], peer, tag)]
        deadline = time.perf_counter() + QUICK_S  # _spin's polling, inline: this path is hot
        try:
            while not MPI.Request.Testall(mpi):
                if time.perf_counter() > deadline:
                    break
                os.sched_yield()
            else:
                return
        except MPI.Exception:
            pass  # wait_all names the failed message
        self.wait_all([Request(r, (op.op, op.seq, kind, buf.shape, buf.dtype, peer))
                       for r, kind, buf in zip(mpi, ("recv", "send"), (recvbuf, sendbuf))])

    def _plain(self, buf, peer: int) -> bool:
        """A contiguous host array to or from a rank of this communicator, outside any
        operation: a user message that needs neither staging nor an operation's channel."""
        return (self._op is None and type(buf) is np.ndarray and buf.flags.c_contiguous
                and 0 <= peer < self.size)

    def _blocking(self, call, buf, peer: int, tag: int, kind: str) -> None:
        """A :meth:`_plain` message, posted and polled for up to ``QUICK_S``; only a longer
        wait makes the record it reports and goes through :meth:`wait`. A ping-pong of 8 bytes
        took 3.9 µs one way through the general path, 1.5 µs bare."""
        self._messages += 1
        fields = (kind, self._messages, kind, buf.shape, buf.dtype, peer)  # of its Wait
        self._recent.note_fields(self.name, fields)
        request = call([buf, mpi_type(buf.dtype)], peer, tag)
        try:
            if self._spin(request.Test):
                return
        except MPI.Exception as error:
            raise self._failure([Request(request, fields)], [error.Get_error_code()]) from None
        self.wait(Request(request, fields))

    def _route(self, tag: int, kind: str, buf, peer: int):
        """Channel, tag and watchdog record of one message."""
        if not 0 <= peer < self.size:
            raise CommError(f"{self}: peer rank {peer} is outside 0..{self.size - 1}")
        op = self._op
        if op is None:  # a user's message: the fields of its Wait, which is built if asked for
            self._messages += 1
            fields = (kind, self._messages, kind, buf.shape, buf.dtype, peer)
            self._recent.note_fields(self.name, fields)
            return self._comm, tag, fields
        # an operation's message: likewise
        return self._coll, self.tag(op.seq), (op.op, op.seq, kind, buf.shape, buf.dtype, peer)

    def _stage(self, sendbuf, recvbuf):
        """What MPI reads and writes for ``sendbuf`` and ``recvbuf`` (``None`` passes), and the
        step that ends the message: staged buffers back to the device and the pool (staging.py)."""
        if _host(sendbuf) and _host(recvbuf):  # MPI reads and writes them as they are
            return (sendbuf, recvbuf), None
        for buf in (sendbuf, recvbuf):
            if buf is not None:
                check_contiguous(buf)
        send, sent = (None, None) if sendbuf is None else \
            staging.outgoing(sendbuf, self.cuda_aware, self.workspace)
        recv, received = (None, None) if recvbuf is None else \
            staging.incoming(recvbuf, self.cuda_aware, self.workspace)
        if sent is None or received is None:
            return (send, recv), sent or received

        def finish():
            received()
            sent()

        return (send, recv), finish

    def _post(self, call, buf, *args):
        """``call(*args)``, an MPI call on ``buf``. A device buffer that MPI cannot read, handed
        to it under a claim of CUDA-awareness, raises :class:`CommError` naming the claim."""
        try:
            return call(*args)
        except (TypeError, BufferError) as error:
            if not self.cuda_aware or isinstance(buf, np.ndarray):
                raise
            raise CommError(f"{self}: {refused(error)}") from error


def _host(buf) -> bool:
    """No buffer, or a contiguous host array: one that MPI takes as it is."""
    return buf is None or (type(buf) is np.ndarray and buf.flags.c_contiguous)
