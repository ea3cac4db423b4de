"""The most bytes a block of code holds at once, on the device its arrays live on.

On the CPU, and on the device double (whose arrays are NumPy's behind a wall), tracemalloc
sees every buffer NumPy allocates and every Python object. On a GPU it sees neither the
device's arrays nor their sizes. There CuPy's memory pool tells a memory hook of each array it
hands out and takes back (``cupy.cuda.MemoryHook``,
https://docs.cupy.dev/en/stable/reference/generated/cupy.cuda.MemoryHook.html); the hook adds
up the bytes asked for, not the pool's rounding to 512, as tracemalloc counts what was asked.
As with tracemalloc, only what the block allocates counts, from zero, and arrays made before
it and freed inside it are not subtracted. Hooks belong to the thread that installs them.

    with peak_bytes() as seen:
        strategy.step(batch)
    seen.bytes   # the peak
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager

from . import backend


class Peak:
    """The running count of a block's live bytes and its most."""

    def __init__(self) -> None:
        self.live = self.bytes = 0
        self._sizes: dict[int, int] = {}  # device pointer → bytes asked for

    def allocated(self, pointer: int, size: int) -> None:
        self._sizes[pointer] = size
        self.live += size
        self.bytes = max(self.bytes, self.live)

    def freed(self, pointer: int) -> None:
        self.live -= self._sizes.pop(pointer, 0)  # made before the block: never counted


@contextmanager
def peak_bytes() -> Iterator[Peak]:
    """Measure the block's peak of live bytes on the current device (``backend.device()``)."""
    seen = Peak()
    if backend.device() == "cuda":
        with _pool_hook(seen):
            yield seen
        return
    tracemalloc.start()
    try:
        yield seen
    finally:
        seen.live, seen.bytes = tracemalloc.get_traced_memory()
        tracemalloc.stop()


@contextmanager
def _pool_hook(seen: Peak) -> Iterator[None]:
    import cupy

    class Hook(cupy.cuda.MemoryHook):
        name = "scratchpar.peak"

        def malloc_postprocess(self, **call):  # device_id, size, mem_size, mem_ptr, pmem_id
            seen.allocated(call["mem_ptr"], call["size"])

        def free_preprocess(self, **call):  # device_id, mem_size, mem_ptr, pmem_id
            seen.freed(call["mem_ptr"])

    with Hook():
        yield
