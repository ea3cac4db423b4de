"""Communicator: one MPI communicator, messages on NumPy/CuPy arrays, and the one place that waits.

Only comm/ imports mpi4py. Arrays always travel through the upper-case buffer API (never
pickled; buffers.py); lower-case pickling carries small metadata only (shapes, signatures).
"""

from __future__ import annotations

import functools
import os
import time

import numpy as np
from mpi4py import MPI

from scratchpar.comm import debug, staging
from scratchpar.comm.buffers import Request, check_contiguous, mpi_type, spec
from scratchpar.comm.cuda_aware import detect_cuda_aware, failed_directly, refused
from scratchpar.comm.errors import CommError, MessageError, WaitTimeout
from scratchpar.comm.native import NativeCollectives
from scratchpar.comm.watchdog import Recent, Wait, debug_enabled, default_timeout, failed, report
from scratchpar.comm.workspace import Workspace

SPIN_S = 2e-2  # poll (yielding the core to any runnable rank) this long before napping
MAX_NAP_S = 1e-3  # then sleep between polls, doubling up to this, to free an oversubscribed core
QUICK_S = 1e-4  # a plain message's own polling, before the general wait takes over


class Communicator(NativeCollectives):
    """One mpi4py intracommunicator with ``rank``, ``size``, ``local_rank`` and ``local_size``.

    Point-to-point calls post on the user channel. Inside an operation (see :meth:`enter`;
    every collective is one) they post on a private duplicate, tagged by the operation's
    sequence number, so a collective's messages never match a user's. Every wait goes through
    :meth:`wait_all`, which polls (yielding the core), naps when the wait is long, and raises
    :class:`WaitTimeout` past ``timeout`` seconds.
    """

    def __init__(self, mpi_comm=None, *, timeout: float | None = None, name: str = "world",
                 cuda_aware: bool | None = None):
        self._comm = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
        self._coll = self._comm.Dup()  # collectives' channel
        self._check = self._comm.Dup()  # debug-mode signature checks
        self.rank, self.size, self.name = self._comm.Get_rank(), self._comm.Get_size(), name
        node = self._comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank, self.local_size = node.Get_rank(), node.Get_size()  # on this node
        node.Free()
        self.tag_ub = MPI.COMM_WORLD.Get_attr(MPI.TAG_UB)  # the largest tag (≥ 32767 by MPI)
        self.timeout = default_timeout() if timeout is None else timeout
        self.cuda_aware = detect_cuda_aware() if cuda_aware is None else cuda_aware
        self.debug = debug_enabled()  # compare every collective's signature across ranks first
        self._seq = 0  # operations started here; every rank numbers them alike
        self._messages = 0  # user messages posted here, numbered apart: only some ranks send
        self._op: Wait | None = None  # the collective whose messages are being posted
        self._recent = Recent()  # shared with every split and dup (see last_op)
        self.workspace = Workspace()  # scratch and staging buffers, shared with splits and dups
        self.tracer = None  # a trace.Tracer records every collective here (splits, dups alike)

    def __repr__(self) -> str:
        return f"Communicator({self.name}, rank {self.rank} of {self.size})"

    # -- structure ------------------------------------------------------------------------------
    def split(self, color: int, key: int | None = None, name: str | None = None) -> Communicator:
        """Ranks with equal ``color`` form a new communicator, ordered by ``key`` (default rank)."""
        sub = self._comm.Split(color, self.rank if key is None else key)
        return self._family(Communicator(sub, timeout=self.timeout, cuda_aware=self.cuda_aware,
                                         name=name or f"{self.name}/{color}"))

    def dup(self, name: str | None = None) -> Communicator:
        """The same ranks on a separate channel: a subsystem's messages never mix with others'."""
        return self._family(Communicator(self._comm.Dup(), timeout=self.timeout,
                                         name=name or self.name, cuda_aware=self.cuda_aware))

    def free(self) -> None:
        """Collective: give this communicator's channels back to MPI, which has a few thousand
        (a program that builds many meshes or strategies frees those it is done with)."""
        for channel in (self._check, self._coll, self._comm):
            if channel != MPI.COMM_WORLD:
                channel.Free()

    def barrier(self) -> None:
        """Wait until every rank arrives (a polled non-blocking barrier: waiters nap, not spin)."""
        if self.debug:  # a rank in a barrier meets one in a collective's check, not a hang
            debug.check(self, {"collective": "barrier"})
        self.wait(Request(self._coll.Ibarrier(), self._next_wait("barrier")))

    def abort(self, code: int = 1) -> None:
        """End every rank of the job now."""
        MPI.COMM_WORLD.Abort(code)

    @property
    def last_op(self) -> str | None:
        """The operation this rank started most recently here or on any split or dup of this
        communicator (a collective, barrier, metadata exchange or user message), or ``None``."""
        return self._recent.describe()

    # -- point to point -------------------------------------------------------------------------
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

    # -- waiting --------------------------------------------------------------------------------
    def wait(self, request: Request) -> None:
        if request.finish is None and not request.mpi:  # complete and delivered: waited before
            return
        try:
            if request.mpi.Test():  # already in: none of a longer wait's bookkeeping
                request.complete()
                return
        except MPI.Exception as error:
            raise self._failure([request], [error.Get_error_code()]) from None
        self.wait_all([request])

    def test_all(self, requests: list[Request]) -> bool:
        """True (and receives delivered) if every request is complete; never blocks."""
        if not self._testall(requests, [r.mpi for r in requests], [MPI.Status() for _ in requests]):
            return False
        for r in requests:
            r.complete()
        return True

    def wait_all(self, requests: list[Request]) -> None:
        """Block until every request completes, or raise :class:`WaitTimeout` past the deadline."""
        mpi, statuses = [r.mpi for r in requests], [MPI.Status() for _ in requests]
        test = functools.partial(self._testall, requests, mpi, statuses)
        if not self._spin(test):
            self._poll(test, lambda: [r.wait for r, m in zip(requests, mpi)
                                      if m != MPI.REQUEST_NULL])
        for r in requests:
            r.complete()

    def wait_any(self, requests: list[Request]) -> int:
        """Block until one of ``requests`` completes; deliver it and return its index. A server
        that posts one receive per client serves them in arrival order this way. Raises
        :class:`WaitTimeout` past the deadline, as :meth:`wait_all` does."""
        live = [i for i, r in enumerate(requests) if r.mpi != MPI.REQUEST_NULL]
        if not live:
            raise ValueError("wait_any needs at least one request still pending")
        pending, mpi = [requests[i] for i in live], [requests[i].mpi for i in live]
        index = live[self._poll(lambda: self._testany(pending, mpi),
                                lambda: [r.wait for r in pending])]
        requests[index].complete()
        return index

    def _poll(self, done, waits):
        """Call ``done()`` until it returns neither ``False`` nor ``None``, and return that: spin
        (yielding the core) at first, then nap longer and longer; past ``timeout`` raise
        :class:`WaitTimeout` naming ``waits()``. Every blocking wait here goes through this."""
        start = time.perf_counter()
        nap = 1e-5
        while (result := done()) is None or result is False:
            waited = time.perf_counter() - start
            if self.timeout and waited > self.timeout:
                raise WaitTimeout(report(self.rank, self.name, waits(), waited))
            if waited > SPIN_S:
                time.sleep(nap)
                nap = min(2 * nap, MAX_NAP_S)
            else:
                os.sched_yield()  # free the core at once if another rank waits for it
        return result

    def _testany(self, requests: list[Request], mpi: list) -> int | None:
        """``MPI_Testany``: the index of a completed request, or ``None``; an MPI error becomes a
        :class:`MessageError` naming the messages."""
        status = MPI.Status()
        try:
            index, done = MPI.Request.Testany(mpi, status)
        except MPI.Exception as error:
            reason = _reason(error.Get_error_code())
            raise MessageError(failed(self.rank, self.name, [(r.wait, reason) for r in requests])
                               + failed_directly(self.cuda_aware)) from None
        return index if done and index != MPI.UNDEFINED else None

    def _testall(self, requests: list[Request], mpi: list, statuses: list) -> bool:
        """``MPI_Testall``; an MPI error becomes a :class:`MessageError` naming each failed
        message and MPI's reason (MPI's own words only say "see the MPI_ERROR field")."""
        try:
            return MPI.Request.Testall(mpi, statuses)
        except MPI.Exception as error:
            codes = [s.Get_error() for s in statuses]
            if error.Get_error_code() != MPI.ERR_IN_STATUS:
                codes = [error.Get_error_code()] * len(requests)
            raise self._failure(requests, codes) from None

    def _failure(self, requests: list[Request], codes: list[int]) -> MessageError:
        failures = [(r.wait, _reason(c)) for r, c in zip(requests, codes)
                    if MPI.Get_error_class(c) not in (MPI.SUCCESS, MPI.ERR_PENDING)]
        return MessageError(failed(self.rank, self.name, failures)
                            + failed_directly(self.cuda_aware))

    # -- collectives' bookkeeping ---------------------------------------------------------------
    def enter(self, wait: Wait | None) -> Wait | None:
        """Until the next ``enter``, messages posted belong to the operation ``wait`` (``None``:
        to the user): they travel on the collectives' channel, tagged by ``wait.seq``. Returns
        the operation that was current, for the caller to restore."""
        outer, self._op = self._op, wait
        if wait is not None:
            self._recent.note(self.name, wait)
        return outer

    def next_seq(self) -> int:
        """Number the next operation (all ranks call operations in the same order)."""
        self._seq += 1
        return self._seq

    def allgather_obj(self, obj, what: str = "metadata exchange") -> list:
        """Small picklable metadata from every rank, after a polled barrier (watchdog-covered).

        ``what`` names the exchange. Every exchange shares one channel, so ranks in different
        exchanges would read each other's metadata: instead they raise
        :class:`CollectiveMismatch`, every one of them, naming what each rank was doing.
        """
        self.wait(Request(self._check.Ibarrier(), self._next_wait(what)))
        seen = self._check.allgather((what, obj))
        debug.compare(self.name, [w for w, _ in seen])
        return [o for _, o in seen]

    # -- internals ------------------------------------------------------------------------------
    def _family(self, child: Communicator) -> Communicator:
        child._recent, child.tracer, child.workspace = self._recent, self.tracer, self.workspace
        return child

    def _next_wait(self, op: str) -> Wait:
        return self._recent.note(self.name, Wait(op, self.next_seq()))

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

    def _spin(self, test) -> bool:
        """Call ``test()``, yielding the core between calls as :meth:`_poll` does, until it is
        true or ``QUICK_S`` has passed: whether it came true. A wait this short needs none of
        a long wait's bookkeeping."""
        deadline = time.perf_counter() + QUICK_S
        while not test():
            if time.perf_counter() > deadline:
                return False
            os.sched_yield()
        return True

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


def _reason(code: int) -> str:
    """MPI's words for an error code, read the same under every MPI: Open MPI leads with the
    class's name ("MPI_ERR_TRUNCATE: message truncated"), MPICH does not ("Message truncated")."""
    words = MPI.Get_error_string(code)
    name, colon, rest = words.partition(": ")
    if colon and name.startswith("MPI_ERR_"):
        words = rest[:1].upper() + rest[1:]
    return words


def _host(buf) -> bool:
    """No buffer, or a contiguous host array: one that MPI takes as it is."""
    return buf is None or (type(buf) is np.ndarray and buf.flags.c_contiguous)
