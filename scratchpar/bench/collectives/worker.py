"""One rank of the collectives benchmark: all-reduce contenders timed in turns, in blocks."""

from __future__ import annotations

import math
import time

import numpy as np

from ... import backend
from ...comm.collectives import all_reduce_
from ...plan.calibrate import one_way
from ...timing import clocked, medians, slowest, sync
from ..timing import Timed, interleaved, turns

MESSAGE_BYTES = (8, 4096)  # a message's fixed cost: 8 B, and 4 KiB


def checked(comm, name: str, buf, send):
    """An all-reduce into ``buf`` (MPI's reads ``send``, the hand-written ones work in place),
    checked once: rank+1 everywhere must sum to p(p+1)/2 (exact in float32); then zeros."""
    source = send if name == "mpi" else buf
    call = ((lambda: comm.mpi_allreduce(send, buf, "sum", blocking=True)) if name == "mpi"
            else (lambda: all_reduce_(comm, buf, "sum", name)))
    source[...] = comm.rank + 1
    call()
    got, expected = backend.to_host(buf), comm.size * (comm.size + 1) / 2
    if not np.all(got == expected):
        raise AssertionError(f"{name} all-reduce of {buf.nbytes} bytes is wrong on rank "
                             f"{comm.rank}: got {got[:4]}…, expected {expected}")
    source[...] = buf[...] = 0
    return call


def time_size(comm, names: list[str], nbytes: int, repeats: int, block_s: float) -> dict:
    """Median and samples of each contender's seconds per call on one zero-filled float32 buffer
    (the sums never overflow), in turns: the slowest rank's, in blocks of about ``block_s``."""
    buf = backend.xp_default().zeros(nbytes // 4, dtype=np.float32)  # (N/4,) shared by all
    send, blocks, calls = backend.xp_default().zeros_like(buf), {}, {}
    for name in names:
        call = checked(comm, name, buf, send)
        sync(comm)
        once = slowest(comm, clocked(call)())[0]  # warm; a call takes the same max on every rank
        calls[name] = max(1, min(1000, math.ceil(block_s / once)))
        blocks[name] = Timed(lambda call=call, n=calls[name]: [call() for _ in range(n)])
    per_block = turns(comm, blocks, {"repeats": repeats, "warmup": 0})
    return {name: {"median_s": t["median_s"] / calls[name],
                   "samples_s": [s / calls[name] for s in t["samples_s"]]}
            for name, t in per_block.items()}


def messages(comm, nbytes: int, repeats: int, trips: int) -> dict:
    """Rank 0's median one-way seconds of an ``nbytes`` message to rank 1 and back through the
    Communicator and through MPI's own calls, in turns of ``trips`` round trips."""
    buf = backend.xp_default().zeros(nbytes, dtype=np.uint8)

    def block(send, recv):
        for _ in range(trips):
            if comm.rank == 0:
                send(buf, 1)
                recv(buf, 1)
            elif comm.rank == 1:
                recv(buf, 0)
                send(buf, 0)

    ways = {"scratchpar": (comm.send, comm.recv), "mpi": (comm.mpi_send, comm.mpi_recv)}
    samples = interleaved({name: Timed(lambda pair=pair: block(*pair))
                           for name, pair in ways.items()}, repeats, 1, start=lambda: sync(comm))
    return {name: float(np.median(s)) / (2 * trips) for name, s in samples.items()}


def copies(nbytes: int, repeats: int) -> dict:
    """Median seconds of the two copies that staging makes of an ``nbytes`` buffer: device →
    pinned host (a send) and pinned host → device (a receive); the staged path's ceiling."""
    device = backend.xp_default().zeros(nbytes // 4, dtype=np.float32)  # (N/4,)
    host = backend.empty_pinned(device.shape, device.dtype)

    def both():
        start = time.perf_counter()
        device.get(out=host)  # blocking: waits for the copy
        middle = time.perf_counter()
        device.set(host)
        backend.sync()
        return middle - start, time.perf_counter() - middle

    to_host, to_device = medians(both, repeats)
    return {"bytes": nbytes, "to_host_s": to_host, "to_device_s": to_device}


def measure_ranks(comm, cfg: dict) -> dict:
    """Every contender at every size of ``cfg`` ("raw": {contender: {bytes: timings}}); with
    ``"pingpong"``, the ceilings (one way through the Communicator at the smallest and the
    largest size, a round trip at a time; the copies on a device) and the messages too."""
    sizes, repeats = cfg["sizes"], cfg["repeats"]
    result = {"cuda_aware": comm.cuda_aware, "raw": {}, "copies": None}
    for nbytes in sizes:
        for name, timings in time_size(comm, cfg["contenders"], nbytes, repeats,
                                       cfg["block_s"]).items():
            result["raw"].setdefault(name, {})[str(nbytes)] = timings
    if cfg["pingpong"]:
        result["pingpong"] = {str(n): one_way(comm, 1, n, repeats) for n in (sizes[0], sizes[-1])}
        result["messages"] = {str(n): messages(comm, n, repeats, cfg["trips"])
                              for n in MESSAGE_BYTES}
        if backend.device() != "cpu" and comm.rank == 0:
            result["copies"] = copies(sizes[-1], repeats)
    return result
