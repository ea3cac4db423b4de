"""MPI's own collectives on flat arrays, as every Communicator offers them: the baseline in the
benchmarks and the oracle in the tests (``algorithm="mpi"``)."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from scratchpar.comm.buffers import Request, mpi_type, reducible, spec
from scratchpar.comm.watchdog import Wait

MPI_OPS = {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}


class NativeCollectives:
    """Mixed into :class:`~scratchpar.comm.mpi.Communicator`: each collective staged like any
    message (``_stage``), posted non-blocking on the collectives' channel and waited for in the
    one place that waits (``wait``)."""

    def mpi_allreduce(self, sendbuf, recvbuf, op: str, blocking: bool = False) -> None:
        """``recvbuf ← ⊕ sendbuf`` by the MPI library (``blocking`` calls MPI_Allreduce itself)."""
        reducible(sendbuf if sendbuf is not None else recvbuf)
        if blocking:
            (send, recv), finish = self._stage(sendbuf, recvbuf)
            self._post(self._coll.Allreduce, sendbuf, spec(send), spec(recv), MPI_OPS[op])
            if finish is not None:
                finish()
            return
        self._mpi("Iallreduce", sendbuf, recvbuf, lambda s, r: (s, r, MPI_OPS[op]))

    def mpi_send(self, buf, dest: int) -> None:
        """MPI's own blocking send (MPI_Send), staged like any message: the floor a benchmark
        sets beside :meth:`send`. On the collectives' channel, at the one tag an operation's
        sequence number reaches last (``tag_ub``)."""
        self._blocking_mpi(self._coll.Send, buf, None, dest)

    def mpi_recv(self, buf, source: int) -> None:
        """MPI's own blocking receive (MPI_Recv), the counterpart of :meth:`mpi_send`."""
        self._blocking_mpi(self._coll.Recv, None, buf, source)

    def _blocking_mpi(self, call, sendbuf, recvbuf, peer: int) -> None:
        buf = sendbuf if sendbuf is not None else recvbuf
        if type(buf) is np.ndarray:  # bare: nothing of this engine's between the call and MPI
            call([buf, mpi_type(buf.dtype)], peer, self.tag_ub)
            return
        (send, recv), finish = self._stage(sendbuf, recvbuf)
        self._post(call, buf, spec(send if sendbuf is not None else recv), peer, self.tag_ub)
        if finish is not None:
            finish()

    def mpi_reduce_scatter(self, sendbuf, recvbuf, counts: list[int], op: str) -> None:
        reducible(sendbuf)
        self._mpi("Ireduce_scatter", sendbuf, recvbuf, lambda s, r: (s, r, counts, MPI_OPS[op]))

    def mpi_allgather(self, sendbuf, recvbuf, counts: list[int]) -> None:
        self._mpi("Iallgatherv", sendbuf, recvbuf, lambda s, r: (s, vspec(r, counts)))

    def mpi_bcast(self, buf, root: int) -> None:
        send, recv = (buf, None) if self.rank == root else (None, buf)
        self._mpi("Ibcast", send, recv, lambda s, r: (s if self.rank == root else r, root))

    def mpi_reduce(self, sendbuf, recvbuf, op: str, root: int) -> None:
        reducible(sendbuf if sendbuf is not None else recvbuf)
        self._mpi("Ireduce", sendbuf, recvbuf, lambda s, r: (s, r, MPI_OPS[op], root))

    def mpi_gather(self, sendbuf, recvbuf, counts: list[int], root: int) -> None:
        self._mpi("Igatherv", sendbuf, recvbuf, lambda s, r: (s, vspec(r, counts), root))

    def mpi_scatter(self, sendbuf, recvbuf, counts: list[int], root: int) -> None:
        self._mpi("Iscatterv", sendbuf, recvbuf, lambda s, r: (vspec(s, counts), r, root))

    def mpi_alltoall(self, sendbuf, recvbuf) -> None:
        """MPI's all-to-all of p equal blocks: block j of ``sendbuf`` to rank j."""
        self._mpi("Ialltoall", sendbuf, recvbuf, lambda s, r: (blocks(s), blocks(r)))

    def mpi_alltoallv(self, sendbuf, recvbuf, sent: list[int], received: list[int]) -> None:
        """``sent[j]`` elements of ``sendbuf`` to rank j, ``received[i]`` from rank i."""
        self._mpi("Ialltoallv", sendbuf, recvbuf,
                  lambda s, r: (vspec(s, sent), vspec(r, received)))

    def _mpi(self, call: str, sendbuf, recvbuf, args) -> None:
        (send, recv), finish = self._stage(sendbuf, recvbuf)
        seq = self._op.seq if self._op else self.next_seq()
        buf = sendbuf if sendbuf is not None else recvbuf
        wait = Wait(f"MPI {call}", seq, "", buf.shape, buf.dtype)
        start = getattr(self._coll, call)
        self.wait(Request(self._post(start, buf, *args(spec(send), spec(recv))), wait, finish))


def vspec(spec, counts: list[int]):
    """A vector spec: per-rank element counts laid end to end (``None`` off the root)."""
    if spec is None:
        return None
    buf, _, dtype = spec
    displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist()
    return [buf, (list(counts), displs), dtype]


def blocks(spec):
    """A spec without its count: mpi4py cuts the buffer into one equal block per rank."""
    buf, _, dtype = spec
    return [buf, dtype]
