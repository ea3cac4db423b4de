"""Windows: memory other ranks read and write without the owner's help (MPI-3 RMA).

Two kinds, both host memory (NumPy), whatever device the ranks compute on:

- :class:`SharedArray`, one array that every rank of a node maps into its address space
  (``MPI_Win_allocate_shared``): plain loads and stores, the ground Hogwild stands on (Niu et
  al. 2011), and an exclusive lock for the writers that want one.
- :class:`RemoteArray`, one array on an owner rank that the others read (``MPI_Get``) and add to
  (``MPI_Accumulate``, elementwise atomic; ``MPI_Fetch_and_op`` where the adder must know what
  was there) at scattered indices, inside one passive-target epoch
  that every rank opens at creation (``MPI_Win_lock_all``): the same across nodes.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
from mpi4py import MPI

from .buffers import mpi_type


def _size(shape, dtype) -> tuple[tuple[int, ...], np.dtype, int]:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise ValueError(f"a window's shape must be non-negative integers, got {shape}")
    dtype = np.dtype(dtype)
    return shape, dtype, math.prod(shape)


class SharedArray:
    """A ``shape`` array of ``dtype`` shared by every rank of ``comm``, which must all be on one
    node: ``array`` is the same memory in each process (rank 0 allocates it, zeroed; the others
    map rank 0's segment). Collective to create and to :meth:`free`.

    Loads and stores need no call at all, and race freely. Under the window's passive-target
    epoch (open from creation to :meth:`free`), :meth:`sync` is the memory barrier that makes a
    rank's stores visible and others' visible to it. :meth:`exclusive` is a lock only one rank
    holds at a time, for writers that must not race."""

    def __init__(self, comm, shape, dtype=np.float64):
        shape, self.dtype, count = _size(shape, dtype)
        node = comm._comm.Split_type(MPI.COMM_TYPE_SHARED)
        spans = node.Get_size() != comm.size
        if spans:
            node.Free()
            raise ValueError(f"a shared array needs every rank on one node; {comm.name} spans "
                             "several (use a RemoteArray across nodes)")
        mine = count * self.dtype.itemsize if comm.rank == 0 else 0
        self._win = MPI.Win.Allocate_shared(mine, self.dtype.itemsize, comm=comm._comm)
        self._lock = MPI.Win.Allocate_shared(8 if comm.rank == 0 else 0, 8, comm=comm._comm)
        node.Free()
        memory, _ = self._win.Shared_query(0)
        self.array = np.ndarray(shape, self.dtype, buffer=memory)  # every rank's view of it
        self._word = np.zeros(1, np.int64)  # a get under the lock lands here
        self._win.Lock_all(MPI.MODE_NOCHECK)
        if comm.rank == 0:
            self.array[...] = 0
        self._comm = comm
        self.settle()

    def sync(self) -> None:
        """The memory barrier of the unified model (MPI-3.1 §11.4): this rank's stores are
        visible to the others', and theirs (synced before) to this rank's loads."""
        self._win.Sync()

    def settle(self) -> None:
        """Collective: every rank's stores so far are done and visible to every rank."""
        self.sync()
        self._comm.barrier()
        self.sync()

    @contextlib.contextmanager
    def exclusive(self):
        """``with shared.exclusive():`` holds the lock that at most one rank holds at a time,
        and sees every store made under it before. MPI may take a lock lazily, at the first
        RMA call of the epoch (MPI-3.1 §11.5.3), so a one-word get takes it now."""
        self._lock.Lock(0, MPI.LOCK_EXCLUSIVE)
        try:
            self._lock.Get(self._word, 0)
            self._lock.Flush(0)
            self.sync()
            yield self.array
            self.sync()
        finally:
            self._lock.Unlock(0)

    def free(self) -> None:
        """Collective: close the epoch and release the memory (``array`` is invalid after)."""
        self.sync()
        self._comm.barrier()
        self._win.Unlock_all()
        self.array = None
        self._win.Free()
        self._lock.Free()


class RemoteArray:
    """A flat array of ``size`` elements of ``dtype`` on rank ``owner`` of ``comm``, zeroed,
    that every rank reads and adds to at scattered indices. Collective to create and free; the
    operations in between are one rank's alone. Adds from many ranks to one element all land
    (``MPI_Accumulate`` is elementwise atomic), in some order."""

    def __init__(self, comm, size: int, dtype=np.float64, owner: int = 0):
        (size,), self.dtype, _ = _size(size, dtype)
        if size >= 2**31:
            raise ValueError(f"a remote array holds fewer than 2³¹ elements (MPI's displacements "
                             f"are C ints); asked for {size:,}")
        if not 0 <= owner < comm.size:
            raise ValueError(f"owner {owner} is not a rank of {comm.name} (size {comm.size})")
        self.size, self.owner, self._comm = size, owner, comm
        mine = size * self.dtype.itemsize if comm.rank == owner else 0
        self._win = MPI.Win.Allocate(mine, self.dtype.itemsize, comm=comm._comm)
        self._type = mpi_type(self.dtype)
        self.local = np.ndarray((size if comm.rank == owner else 0,), self.dtype,
                                buffer=self._win.tomemory())  # the owner's own view
        self.local[...] = 0
        comm.barrier()
        self._win.Lock_all()

    def _target(self, indices):
        """The target datatype of ``indices`` (a slice of [0, size), or an int array) and how
        many elements it names; the caller frees it."""
        if isinstance(indices, slice):
            start, stop, stride = indices.indices(self.size)
            if stride != 1:
                raise ValueError(f"a remote array's slices are contiguous; got step {stride}")
            n = max(stop - start, 0)
            return self._type.Create_indexed_block(n, [start]).Commit(), n
        indices = np.ascontiguousarray(indices, dtype=np.int64)  # (n,)
        if len(indices) and (indices.min() < 0 or indices.max() >= self.size):
            raise IndexError(f"indices outside [0, {self.size}) of a remote array")
        kind = self._type.Create_indexed_block(1, indices.astype(np.int32).tolist()).Commit()
        return kind, len(indices)

    def read(self, indices) -> np.ndarray:
        """The owner's values at ``indices`` (an int array (n,) or a slice), as they are now."""
        kind, n = self._target(indices)
        out = np.empty(n, self.dtype)  # (n,)
        try:
            self._win.Get([out, self._type], self.owner, (0, 1, kind))
            self._win.Flush(self.owner)
        finally:
            kind.Free()
        return out

    def add(self, indices, values) -> None:
        """``array[indices] += values`` on the owner, atomically per element; ``indices`` (an
        int array or a slice) must not repeat within one call (sum the repeats first)."""
        values = np.ascontiguousarray(values, dtype=self.dtype).reshape(-1)  # (n,)
        kind, n = self._target(indices)
        if values.shape != (n,):
            kind.Free()
            raise ValueError(f"{values.shape[0]} values for {n} indices")
        try:
            self._win.Accumulate([values, self._type], self.owner, (0, 1, kind), MPI.SUM)
            self._win.Flush(self.owner)
        finally:
            kind.Free()

    def fetch_add(self, index: int, value) -> object:
        """``array[index] += value`` on the owner, atomically, and the value it held before
        (``MPI_Fetch_and_op``): of several ranks adding 1 to a 0, exactly one reads 0."""
        add, old = np.array([value], self.dtype), np.empty(1, self.dtype)
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} outside [0, {self.size}) of a remote array")
        self._win.Fetch_and_op([add, self._type], [old, self._type], self.owner, index,
                               MPI.SUM)
        self._win.Flush(self.owner)
        return old[0]

    def settle(self) -> None:
        """Collective: every rank's adds so far have landed, and the owner's own loads and
        stores (``local``) and the others' gets see one another (MPI-3.1 §11.4)."""
        self._win.Sync()
        self._comm.barrier()
        self._win.Sync()

    def free(self) -> None:
        """Collective: end the epoch (every add has landed) and release the memory."""
        self._win.Unlock_all()
        self._comm.barrier()
        self.local = None
        self._win.Free()
