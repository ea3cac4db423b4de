"""The collectives benchmark: two MPI jobs per world size, then the tables."""

from __future__ import annotations

import argparse

import numpy as np

from ...jobs.harness import Benchmark, Ranks, describe, judge, machine, staging
from ...jobs.mpijob import job
from ...table import table
from ...timing import clocked, medians
from ..timing import on_host
from .report import MPI_OWN, algbw, busbw, crossovers, fits, human, targets

KIB, MIB = 1024, 1024 * 1024
HAND_WRITTEN = ["ring", "recursive_doubling", "rabenseifner", "tree", "auto"]
MPICH_RING = {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}  # the environment of "mpi-ring"
TIMING = {"repeats": 15, "block_s": 0.01, "trips": 2000}  # trips: round trips per message block
QUICK = {"repeats": 2, "block_s": 0.001, "trips": 50, "sizes": [4 * KIB, 64 * KIB, MIB]}
SIZES = [4 * KIB * 4**k for k in range(8)]  # 4 KiB … 64 MiB
MEMCPY_BYTES = 64 * MIB
MESSAGE_TARGETS = {8: 1.3, 4 * KIB: 1.2}  # one way through the Communicator ÷ MPI's own
PER_WORLD_SIZE = ("raw", "pingpong", "copies", "messages")  # what the JSON keeps of each job


def byte_size(text: str) -> int:
    """'4096', '4K', '64M' → bytes (K, M, G: powers of 1024); a whole number of float32s."""
    scale = {"K": KIB, "M": MIB, "G": 1024 * MIB}.get(text[-1:].upper(), 1)
    nbytes = int(text[:-1] if scale > 1 else text) * scale
    if nbytes < 4 or nbytes % 4:
        raise argparse.ArgumentTypeError(f"{text}: need a positive multiple of 4 bytes")
    return nbytes


def add_arguments(parser) -> None:
    parser.add_argument("--sizes", type=lambda s: sorted({byte_size(b) for b in s.split(",")}),
                        help="comma-separated buffer sizes, e.g. 4K,1M,64M (default 4K, 16K, "
                             "… ×4 up to 64M)")


def measure_world(n: int, cfg: dict, device: str) -> dict:
    """The worker's result at world size ``n`` (its "raw" timings, "pingpong", "messages",
    "copies" on a device, "cuda_aware"), with MPICH's ring from a job of its own as "mpi-ring"
    and "times": {contender: {bytes: median seconds}}."""
    worker = "scratchpar.bench.collectives.worker:measure_ranks"
    res = job(n, worker, {**cfg, "contenders": HAND_WRITTEN + ["mpi"], "pingpong": True}, device)
    ring = job(n, worker, {**cfg, "contenders": ["mpi"], "pingpong": False}, device, MPICH_RING)
    res["raw"]["mpi-ring"] = ring["raw"]["mpi"]
    res["times"] = {name: {int(size): timings["median_s"] for size, timings in per.items()}
                    for name, per in res["raw"].items()}
    return res


def message_rows(results: dict, device: str) -> list[dict]:
    """Per world size and message size: one way through the Communicator against MPI's own
    blocking send and receive, and the target (docs/collectives.md)."""
    rows = []
    for n, res in results.items():
        for size, pair in res["messages"].items():
            ratio, bound = pair["scratchpar"] / pair["mpi"], MESSAGE_TARGETS[int(size)]
            rows.append({"n": n, "size": human(int(size)), "send/recv µs": 1e6 * pair["scratchpar"],
                         "MPI_Send/Recv µs": 1e6 * pair["mpi"], "ratio": ratio,
                         "target": f"≤ {bound:g}", "verdict": judge(device, ratio, at_most=bound)})
    return rows


def ceiling_rows(results: dict, memcpy_s: float) -> list[dict]:
    """The speed of memcpy, of the ping-pongs and, on a device, of the staging copies."""
    rows = [("memcpy (np.copyto, host, 1 process)", MEMCPY_BYTES, memcpy_s)]
    for n, res in results.items():
        copies = res["copies"] or {}
        rows += [(f"ping-pong rank 0 ↔ 1 (n={n}), one way", int(size), t)
                 for size, t in res["pingpong"].items()]
        rows += [(f"copy {what} (n={n}, rank 0)", copies["bytes"], copies[key])
                 for key, what in (("to_host_s", "device → pinned host"),
                                   ("to_device_s", "pinned host → device")) if copies]
    return [{"what": what, "size": human(nbytes), "µs": 1e6 * t, "GB/s": nbytes / t / 1e9}
            for what, nbytes, t in rows]


def measure(args) -> dict:
    ranks = args.ranks
    sizes = args.sizes or (QUICK["sizes"] if args.quick else SIZES)
    timing = QUICK if args.quick else TIMING
    repeats, block_s = timing["repeats"], timing["block_s"]
    print(f"collectives benchmark on {describe(args.device)}: float32 sum all-reduce, world sizes "
          f"{ranks}, sizes {human(sizes[0])} … {human(sizes[-1])}")
    print(f"median of {repeats} timed blocks per contender, taken in turns; each block starts at a "
          f"barrier and repeats the call to last ≥ {1e3 * block_s:g} ms"
          + ("" if args.device == "cpu" else ", then waits for the device")
          + "; time = slowest rank")
    src = np.ones(MEMCPY_BYTES // 4, dtype=np.float32)  # (N/4,)
    dst = np.zeros_like(src)
    memcpy_s = medians(clocked(lambda: np.copyto(dst, src), on_host), repeats)[0]
    results = {n: measure_world(n, {**timing, "sizes": sizes}, args.device) for n in ranks}
    cuda_aware = results[ranks[0]]["cuda_aware"]
    print(f"buffers: {staging(args.device, cuda_aware)}\n{machine(args)}")
    rows = [{"n": n, "size": human(size), "algorithm": name, "us": 1e6 * t,
             "algbw_gbs": algbw(size, t) / 1e9, "busbw_gbs": busbw(size, t, n) / 1e9,
             "x_mpi": t / res["times"]["mpi"][size]}
            for n, res in results.items() for size in sizes
            for name in HAND_WRITTEN + list(MPI_OWN) for t in [res["times"][name][size]]]
    messages, fitted, cross = (message_rows(results, args.device), fits(results, sizes),
                               crossovers(results, sizes))
    verdicts = targets(results, sizes, MEMCPY_BYTES / memcpy_s, args.device)
    print(table("all-reduce per size (docs/collectives.md, Algorithm bandwidth and bus "
                "bandwidth)", rows, {"n": "n", "size": "size", "algorithm": "algorithm",
                                     "µs": "us", "algbw GB/s": "algbw_gbs",
                                     "busbw GB/s": "busbw_gbs", "x mpi": "x_mpi"}))
    print(table(f"one message one way, ranks 0 and 1: the Communicator's send and recv against "
                f"MPI's own (median of {repeats} blocks of {timing['trips']} round trips)",
                messages))
    print(table("ceilings", ceiling_rows(results, memcpy_s)))
    print(table("α-β fit (docs/collectives.md, The cost model; β includes the reductions)",
                fitted, {"n": "n", "model": "model", "α µs": lambda f: 1e6 * f["alpha_s"],
                         "1/β GB/s": lambda f: 1e-9 / f["beta_s_per_byte"],
                         "rms rel residual": "rms_rel_residual"}) if fitted else
          "α-β fit: none, one message size cannot separate α from β (--sizes takes several)\n")
    print(table('crossover for algorithm="auto"', cross))
    print(table("targets (docs/collectives.md, Measured)", verdicts))
    return {"cuda_aware": cuda_aware, "world_sizes": ranks, "sizes": sizes, "repeats": repeats,
            "block_seconds": block_s, "memcpy": {"bytes": MEMCPY_BYTES, "seconds": memcpy_s},
            "per_world_size": {str(n): {k: res[k] for k in PER_WORLD_SIZE}
                               for n, res in results.items()},
            "messages": messages, "table": rows, "fits": fitted, "crossovers": cross,
            "targets": verdicts}


BENCHMARK = Benchmark("the hand-written all-reduces (ring, recursive doubling, tree, auto) "
                      "against MPI's own", "sizes 4 KiB, 64 KiB, 1 MiB, 2 repeats", measure,
                      add_arguments, ranks=Ranks((2, 4), (2,), least=2))
