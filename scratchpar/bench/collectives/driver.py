"""The collectives benchmark: two MPI jobs per world size, then what they conclude: bus
bandwidths, the α-β fits, the crossover and the targets."""

from __future__ import annotations

import argparse

import numpy as np

from ...jobs.harness import Benchmark, Ranks, describe, judge, machine, staging
from ...jobs.mpijob import job
from ...parallel.description import Message
from ...plan.fit import alpha_beta
from ...table import table
from ...timing import clocked, medians
from ..timing import on_host

KIB, MIB = 1024, 1024 * 1024
HAND_WRITTEN = ["ring", "recursive_doubling", "rabenseifner", "tree", "auto"]
MPI_OWN = ["mpi", "mpi-ring"]  # MPICH's default, and its ring from a job of its own
MPICH_RING = {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}  # the environment of "mpi-ring"
TIMING = {"repeats": 15, "block_s": 0.01, "trips": 2000}  # trips: round trips per message block
QUICK = {"repeats": 2, "block_s": 0.001, "trips": 50, "sizes": [4 * KIB, 64 * KIB, MIB]}
SIZES = [4 * KIB * 4**k for k in range(8)]  # 4 KiB … 64 MiB
MEMCPY_BYTES = 64 * MIB
RATIO_TARGETS = [  # docs/collectives.md: (contender, limit on time / MPI's default, sizes)
    ("ring", 0.9, lambda size: size >= MIB, ">= 1 MiB"),
    ("auto", 1.3, lambda size: size <= 64 * KIB, "<= 64 KiB"),
]
BUSBW_OF_MEMCPY = 0.5
MESSAGE_TARGETS = {8: 1.3, 4 * KIB: 1.2}  # one way through the Communicator ÷ MPI's own


def byte_size(text: str) -> int:
    """'4096', '4K', '64M' → bytes (K, M, G: powers of 1024); a whole number of float32s."""
    scale = {"K": KIB, "M": MIB, "G": 1024 * MIB}.get(text[-1:].upper(), 1)
    nbytes = int(text[:-1] if scale > 1 else text) * scale
    if nbytes < 4 or nbytes % 4:
        raise argparse.ArgumentTypeError(f"{text}: need a positive multiple of 4 bytes")
    return nbytes


def human(nbytes: int | None) -> str:
    """4096 → '4 KiB', 67108864 → '64 MiB'; None → '-'."""
    if nbytes is None:
        return "-"
    for unit, scale in (("MiB", MIB), ("KiB", KIB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def busbw(nbytes: float, seconds: float, p: int) -> float:
    """Bus bandwidth in bytes/s: N/t · 2(p−1)/p, what each link carries in an optimal all-reduce
    (NCCL's convention, nccl-tests doc/PERFORMANCE.md), comparable across world sizes."""
    return ring_terms(nbytes, p)[1] / seconds


def ring_terms(nbytes: float, p: int) -> tuple[float, float]:
    """(messages, bytes) of a ring all-reduce: t = 2(p−1)·α + 2(p−1)/p·N·β
    (Patarasuk & Yuan 2009, reduce-scatter then all-gather)."""
    return 2 * (p - 1), Message("all-reduce", "world", nbytes, 1).wire(p)


def doubling_terms(nbytes: float, p: int) -> tuple[float, float]:
    """(messages, bytes) of recursive doubling: t = ⌈log₂p⌉(α + N·β) for p a power of two; other
    p add a fold and an unfold of the whole buffer (Thakur, Rabenseifner & Gropp 2005, §4.1)."""
    steps = (p.bit_length() - 1) + (0 if p & (p - 1) == 0 else 2)
    return steps, steps * nbytes


def measure_world(n: int, cfg: dict, device: str) -> dict:
    """The worker's result at world size ``n``, with MPICH's ring from a job of its own as
    "mpi-ring", and "times": {contender: {bytes: median seconds}}."""
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


def fits(results: dict, sizes: list[int]) -> list[dict]:
    """α and β of the ring's and recursive doubling's cost models, per world size; none from one
    size, which cannot tell the two apart."""
    models = [("ring", ring_terms), ("recursive_doubling", doubling_terms)]
    return [{"n": n, "model": name, **alpha_beta([terms(size, n) for size in sizes],
                                                 [res["times"][name][size] for size in sizes])}
            for n, res in results.items() for name, terms in models if len(sizes) > 1]


def crossovers(results: dict, sizes: list[int]) -> list[dict]:
    """Per world size: the largest size where recursive doubling beats the ring, and the sizes
    where one of MPI's own all-reduces beats every hand-written one ("never": none)."""
    rows = []
    for n, res in results.items():
        t = res["times"]
        wins = [s for s in sizes if t["recursive_doubling"][s] < t["ring"][s]]
        mpi = [s for s in sizes if min(t[m][s] for m in MPI_OWN)
               < min(t[h][s] for h in t if h not in MPI_OWN)]
        rows.append({"n": n, "recursive doubling beats ring up to":
                     human(max(wins)) if wins else "never",
                     "MPI's own fastest at": ", ".join(map(human, mpi)) or "never"})
    return rows


def targets(results: dict, sizes: list[int], memcpy_bytes_per_s: float, device: str) -> list[dict]:
    """Per world size: the worst time / MPI's default over the sizes each ratio target covers,
    and the ring's bus bandwidth at the largest size over memcpy's; each with its verdict."""
    missing = "n/a (double)" if device == "double" else "n/a (no size in range)"
    rows = []
    for n, res in results.items():
        t, largest = res["times"], sizes[-1]
        for name, limit, covers, where in RATIO_TARGETS:
            ratios = {s: t[name][s] / t["mpi"][s] for s in sizes if covers(s)}
            worst = max(ratios, key=ratios.get, default=None)  # None: no size in range
            rows.append({"target": f"n={n}: {name} <= {limit:.2f}x MPI default at {where}",
                         "measured": ratios.get(worst), "at": human(worst), "verdict": judge(
                             device, ratios.get(worst), at_most=limit, missing=missing)})
        share = busbw(largest, t["ring"][largest], n) / memcpy_bytes_per_s
        rows.append({"target": f"n={n}: ring bus bw >= {BUSBW_OF_MEMCPY:.2f}x memcpy bw",
                     "measured": share, "at": human(largest),
                     "verdict": judge(device, share, at_least=BUSBW_OF_MEMCPY)})
    return rows


def measure(args) -> dict:
    ranks, timing = args.ranks, QUICK if args.quick else TIMING
    sizes = args.sizes or (QUICK["sizes"] if args.quick else SIZES)
    print(f"collectives benchmark on {describe(args.device)}: float32 sum all-reduce, median of "
          f"{timing['repeats']} blocks of ≥ {1e3 * timing['block_s']:g} ms per contender, in turns"
          + ("" if args.device == "cpu" else ", then waits for the device"))
    src = np.ones(MEMCPY_BYTES // 4, dtype=np.float32)  # (N/4,)
    dst = np.zeros_like(src)
    memcpy_s = medians(clocked(lambda: np.copyto(dst, src), on_host), timing["repeats"])[0]
    results = {n: measure_world(n, {**timing, "sizes": sizes}, args.device) for n in ranks}
    cuda_aware = results[ranks[0]]["cuda_aware"]
    print(f"buffers: {staging(args.device, cuda_aware)}\n{machine(args)}")
    rows = [{"n": n, "size": human(size), "algorithm": name, "us": 1e6 * t,
             "busbw_gbs": busbw(size, t, n) / 1e9, "x_mpi": t / res["times"]["mpi"][size]}
            for n, res in results.items() for size in sizes
            for name in HAND_WRITTEN + MPI_OWN for t in [res["times"][name][size]]]
    print(table("all-reduce per size (docs/collectives.md, Measured)", rows, {
        "n": "n", "size": "size", "algorithm": "algorithm", "µs": "us",
        "busbw GB/s": "busbw_gbs", "x mpi": "x_mpi"}))
    messages = message_rows(results, args.device)
    print(table(f"one message one way, ranks 0 and 1: the Communicator's send and recv against "
                f"MPI's own (blocks of {timing['trips']} round trips)", messages))
    print(table("ceilings", ceiling_rows(results, memcpy_s)))
    fitted = fits(results, sizes)
    print(table("α-β fit (β includes the reductions)", fitted, {
        "n": "n", "model": "model", "α µs": lambda f: 1e6 * f["alpha_s"],
        "1/β GB/s": lambda f: 1e-9 / f["beta_s_per_byte"], "rms rel residual": "rms_rel_residual"})
          if fitted else "\nα-β fit: none, one message size cannot separate α from β")
    cross = crossovers(results, sizes)
    print(table('crossover for algorithm="auto"', cross))
    verdicts = targets(results, sizes, MEMCPY_BYTES / memcpy_s, args.device)
    print(table("targets (docs/collectives.md, Measured)", verdicts))
    return {"cuda_aware": cuda_aware, "world_sizes": ranks, "sizes": sizes,
            "memcpy": {"bytes": MEMCPY_BYTES, "seconds": memcpy_s},
            "per_world_size": {str(n): {k: res[k] for k in ("raw", "pingpong", "copies",
                                                          "messages")}
                               for n, res in results.items()},
            "messages": messages, "table": rows, "fits": fitted, "crossovers": cross,
            "targets": verdicts}


BENCHMARK = Benchmark("the hand-written all-reduces (ring, recursive doubling, tree, auto) "
                      "against MPI's own", "sizes 4 KiB, 64 KiB, 1 MiB, 2 repeats", measure,
                      lambda parser: parser.add_argument(
                          "--sizes", type=lambda s: sorted({byte_size(b) for b in s.split(",")}),
                          help="comma-separated buffer sizes, e.g. 4K,1M,64M (default 4K, 16K, "
                               "… ×4 up to 64M)"), ranks=Ranks((2, 4), (2,), least=2))
