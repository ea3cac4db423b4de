"""Gradient buckets: many arrays packed in order into a few flat buffers, one all-reduce each."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from scratchpar.backend import get_array_module
from scratchpar.comm import collectives
from scratchpar.comm.errors import CommError
from scratchpar.comm.flat import Layout
from scratchpar.comm.progress import Handle


def overflows(held: int, size: int, itemsize: int, bucket_bytes: int) -> bool:
    """Whether an array of ``size`` elements opens a new bucket beside the open one's ``held``:
    where both hold something and together they pass ``bucket_bytes``."""
    return bool(size and held and (held + size) * itemsize > bucket_bytes)


def count(sizes, itemsize: int, bucket_bytes: int) -> int:
    """The buckets :class:`Buckets` packs arrays of ``sizes`` elements into, in that order."""
    found, held = 0, 0
    for size in sizes:
        if not found or overflows(held, size, itemsize, bucket_bytes):
            found, held = found + 1, 0
        held += size
    return found


class Slot(NamedTuple):
    """Where an array lives: ``buffers[bucket][offset : offset + size]``, shaped ``shape``."""

    bucket: int
    offset: int
    size: int
    shape: tuple


class Buckets:
    """The arrays (in the given order) packed into flat buffers of at most ``bucket_bytes`` each.

    Few large messages cost less than many small ones, since each message pays a latency. So data
    parallelism all-reduces buckets of gradients, and starts bucket k as soon as every array in
    ``members[k]`` is ready, while backward goes on (Li et al. 2020, PyTorch DDP, §3.2).

    A bucket holds one dtype. An array joins the open bucket of its dtype unless it would overflow
    it, then opens the next one. An array larger than the limit fills a bucket alone. A bucket's
    buffer is allocated on the arrays' device when first used, and then reused by every
    :meth:`pack`: a caller that reduces a lone array in place never pays for its buffer. With
    ``into``, every bucket holds that dtype, and arrays are converted as they are packed
    (16-bit gradients summed in fp32).
    """

    def __init__(self, arrays, bucket_bytes: int, into=None):
        if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes < 1:
            raise CommError(f"bucket_bytes must be a positive integer, got {bucket_bytes!r}")
        self.bucket_bytes = bucket_bytes
        self.members: list[list[int]] = []  # per bucket: indices of its arrays, in order
        sizes, dtypes, open_bucket = [], [], {}  # open_bucket: dtype → bucket still filling
        self.converts = into is not None
        for i, a in enumerate(arrays):
            dtype = np.dtype(a.dtype if into is None else into)
            k = open_bucket.get(dtype)
            if k is None or overflows(sizes[k], int(a.size), dtype.itemsize, bucket_bytes):
                k = open_bucket[dtype] = len(sizes)
                sizes.append(0)
                dtypes.append(dtype)
                self.members.append([])
            self.members[k].append(i)
            sizes[k] += int(a.size)
        self.dtypes = dtypes  # per bucket
        self.layouts = [Layout([arrays[i].shape for i in members], dtype)  # per bucket
                        for members, dtype in zip(self.members, dtypes)]
        self.sizes = [layout.n for layout in self.layouts]  # per bucket: elements
        self.slots: list[Slot] = [None] * len(arrays)  # per array
        self._place = [0] * len(arrays)  # per array: its index among its bucket's members
        for k, (members, layout) in enumerate(zip(self.members, self.layouts)):
            for j, i in enumerate(members):
                self.slots[i] = Slot(k, layout.offsets[j], layout.sizes[j], layout.shapes[j])
                self._place[i] = j
        self._xp = get_array_module(*arrays)
        self._buffers = [None] * len(sizes)

    def __len__(self) -> int:
        return len(self.sizes)

    def buffer(self, k: int):
        """Bucket ``k``'s flat buffer, (n_k,), allocated on first use."""
        if self._buffers[k] is None:
            self._buffers[k] = self._xp.empty(self.sizes[k], self.dtypes[k])
        return self._buffers[k]

    def allocated(self) -> list:
        """The bucket buffers allocated so far."""
        return [b for b in self._buffers if b is not None]

    def allocated_bytes(self) -> int:
        """Bytes of bucket buffers allocated so far."""
        return sum(b.nbytes for b in self.allocated())

    def view(self, i: int):
        """Array ``i`` as it stands in its bucket (a view: the next pack overwrites it)."""
        k = self.slots[i].bucket
        return self.layouts[k].view(self.buffer(k), self._place[i])

    def pack(self, arrays, bucket: int | None = None) -> None:
        """Copy ``arrays`` (the list the plan was made for; None counts as zeros) into every
        bucket, or one bucket."""
        self._check(arrays, "pack")
        for k in range(len(self)) if bucket is None else [bucket]:
            self.layouts[k].pack([arrays[i] for i in self.members[k]], self.buffer(k))

    def unpack(self, out=None) -> list:
        """The arrays back out of the buffers: as new arrays, or written into ``out``."""
        if out is None:
            return [self.view(i).copy() for i in range(len(self.slots))]
        self._check(out, "unpack")
        for k, members in enumerate(self.members):
            self.layouts[k].unpack(self.buffer(k), [out[i] for i in members])
        return out

    def start(self, comm, bucket: int, op: str = "sum", algorithm: str = "auto") -> Handle:
        """Start all-reducing one bucket's buffer in place; the handle's ``wait()`` ends it."""
        return collectives.all_reduce_start(comm, self.buffer(bucket), op, algorithm)

    def start_all(self, comm, op: str = "sum", algorithm: str = "auto") -> list[Handle]:
        """Start every bucket's all-reduce, in bucket order (every rank in the same order)."""
        return [self.start(comm, k, op, algorithm) for k in range(len(self))]

    def finish(self, handles: list[Handle], out=None) -> list:
        """Wait for every handle, then :meth:`unpack` (into ``out`` if given)."""
        for handle in handles:
            handle.wait()
        return self.unpack(out)

    def _check(self, arrays, what: str) -> None:
        if len(arrays) != len(self.slots):
            raise CommError(f"{what}: the plan has {len(self.slots)} arrays, got {len(arrays)}")
        for i, (a, s) in enumerate(zip(arrays, self.slots)):
            dtype = self.dtypes[s.bucket]
            if a is not None and (tuple(a.shape) != s.shape or
                                  (a.dtype != dtype and not self.converts)):
                raise CommError(f"{what}: array {i} is {tuple(a.shape)} {a.dtype}, the plan "
                                f"has {s.shape} {dtype}")
