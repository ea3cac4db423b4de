"""One rank of the collectives benchmark: all-reduce contenders timed in turns, in blocks."""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from ... import backend
from ...comm.collectives import all_reduce_
from ..timing import slowest, sync
from .report import human


def contender(comm, name: str, buf, send):
    """(call, the array it reads): an all-reduce into ``buf`` (MPI's reads ``send``, the hand-
    written ones work in place)."""
    if name == "mpi":
        return (lambda: comm.mpi_allreduce(send, buf, "sum", blocking=True)), send
    return (lambda: all_reduce_(comm, buf, "sum", name)), buf


def check(comm, name: str, call, result, source) -> None:
    """One all-reduce of rank+1 everywhere must give p(p+1)/2 (exact in float32); then zeros."""
    source[...] = comm.rank + 1
    call()
    expected = comm.size * (comm.size + 1) / 2
    got = backend.to_host(result)
    if not np.all(got == expected):
        raise AssertionError(f"{name} all-reduce of {result.nbytes} bytes is wrong on rank "
                             f"{comm.rank}: got {got[:4]}…, expected {expected}")
    source[...] = 0
    result[...] = 0


def timed_block(comm, call, calls: int) -> float:
    """Seconds per call of ``calls`` calls in a row from a barrier, up to the end of the last
    one on the device (its reductions and copies are asynchronous there)."""
    sync(comm)
    start = time.perf_counter()
    for _ in range(calls):
        call()
    backend.sync()
    return (time.perf_counter() - start) / calls


def time_size(comm, names: list[str], nbytes: int, repeats: int, block_s: float) -> dict:
    """Median per-call seconds of each contender at one size, the contenders taking turns on a
    preallocated, zero-filled float32 buffer (zeros: the sums never overflow); a sample is the
    slowest rank's time per call in a block of about ``block_s`` seconds."""
    xp = backend.xp_default()
    buf = xp.zeros(nbytes // 4, dtype=np.float32)  # (N/4,) shared by every contender
    send = xp.zeros_like(buf)
    calls, blocks = {}, {}
    for name in names:
        call, source = contender(comm, name, buf, send)
        check(comm, name, call, buf, source)
        once = slowest(comm, [timed_block(comm, call, 1)])[0]  # warm, and learn how long a call is
        calls[name] = max(1, min(1000, math.ceil(block_s / once)))  # every rank agrees: same max
        blocks[name] = call
    samples = {name: [] for name in names}
    for r in range(repeats):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            samples[name].append(timed_block(comm, blocks[name], calls[name]))
    worst = slowest(comm, [samples[name] for name in names])  # (C, R)
    return {name: {"median_s": float(np.median(worst[i])), "samples_s": worst[i].tolist(),
                   "calls_per_block": calls[name]} for i, name in enumerate(names)}


def pingpong(comm, nbytes: int, repeats: int) -> float | None:
    """Median one-way seconds of an ``nbytes`` message between ranks 0 and 1 (half a round trip,
    from device memory to device memory on a device); the other ranks wait."""
    buf = backend.xp_default().zeros(nbytes, dtype=np.uint8)
    times = []
    for _ in range(repeats + 1):
        sync(comm)
        start = time.perf_counter()
        if comm.rank == 0:
            comm.send(buf, 1)
            comm.recv(buf, 1)
        elif comm.rank == 1:
            comm.recv(buf, 0)
            comm.send(buf, 0)
        backend.sync()
        times.append((time.perf_counter() - start) / 2)
    return float(np.median(times[1:])) if comm.rank == 0 else None


def copies(nbytes: int, repeats: int) -> dict:
    """Median seconds of the two copies that staging makes of an ``nbytes`` buffer: device →
    pinned host (a send) and pinned host → device (a receive); the staged path's ceiling."""
    device = backend.xp_default().zeros(nbytes // 4, dtype=np.float32)  # (N/4,)
    host = backend.empty_pinned(device.shape, device.dtype)
    times = {"to_host_s": [], "to_device_s": []}
    for _ in range(repeats + 1):
        start = time.perf_counter()
        device.get(out=host)  # blocking: waits for the copy
        middle = time.perf_counter()
        device.set(host)
        backend.sync()
        times["to_host_s"].append(middle - start)
        times["to_device_s"].append(time.perf_counter() - middle)
    return {"bytes": nbytes, **{k: float(np.median(t[1:])) for k, t in times.items()}}


def measure(comm, cfg: dict) -> dict:
    """Every size of ``cfg`` for every contender; with ``"pingpong"``, the ceilings too."""
    sizes, names = cfg["sizes"], cfg["contenders"]
    result = {"world_size": comm.size, "cuda_aware": comm.cuda_aware, "sizes": {},
              "pingpong": None, "copies": None}
    for nbytes in sizes:
        if comm.rank == 0:
            print(f"  n={comm.size}, {human(nbytes)}: {', '.join(names)}", file=sys.stderr,
                  flush=True)
        result["sizes"][str(nbytes)] = time_size(comm, names, nbytes, cfg["repeats"],
                                                 cfg["block_s"])
    if cfg["pingpong"]:
        result["pingpong"] = {"small_bytes": sizes[0], "large_bytes": sizes[-1],
                              "small_s": pingpong(comm, sizes[0], cfg["repeats"]),
                              "large_s": pingpong(comm, sizes[-1], cfg["repeats"])}
        if backend.device() != "cpu" and comm.rank == 0:
            result["copies"] = copies(sizes[-1], cfg["repeats"])
    return result
