"""Communicator: one MPI communicator, its channels, and the operations started on it.

Only comm/ imports mpi4py. The Communicator is three parts, each in its file: messages on
NumPy/CuPy arrays (point_to_point.py), the one place that waits (waiting.py) and MPI's own
collectives (native.py). Lower-case pickling carries small metadata only (shapes, signatures).
"""

from __future__ import annotations

from mpi4py import MPI

from scratchpar.comm import debug
from scratchpar.comm.buffers import Request
from scratchpar.comm.cuda_aware import detect_cuda_aware
from scratchpar.comm.native import NativeCollectives
from scratchpar.comm.point_to_point import PointToPoint
from scratchpar.comm.waiting import Waiting
from scratchpar.comm.watchdog import Recent, Wait, debug_enabled, default_timeout
from scratchpar.comm.workspace import Workspace


class Communicator(PointToPoint, Waiting, NativeCollectives):
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

    def gather_obj(self, obj, what: str = "metadata gather") -> list | None:
        """Small picklable metadata from every rank on rank 0 alone, ``None`` elsewhere: what
        one rank needs (a checkpoint's index), which :meth:`allgather_obj` would copy to every
        rank. ``what`` names it; rank 0 checks that every rank was in the same exchange."""
        self.wait(Request(self._check.Ibarrier(), self._next_wait(what)))
        seen = self._check.gather((what, obj), root=0)
        if seen is None:
            return None
        debug.compare(self.name, [w for w, _ in seen])
        return [o for _, o in seen]

    # -- internals ------------------------------------------------------------------------------
    def _family(self, child: Communicator) -> Communicator:
        child._recent, child.tracer, child.workspace = self._recent, self.tracer, self.workspace
        return child

    def _next_wait(self, op: str) -> Wait:
        return self._recent.note(self.name, Wait(op, self.next_seq()))
