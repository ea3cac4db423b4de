"""Time data parallelism: scaling, bucketed against naive, exposed communication, torch DDP.

One MPI job per world size runs every contender in turns on three MLPs: a compute-bound one
(throughput and scaling efficiency against one rank) and two communication-heavy ones, "wide"
(few large gradients: bandwidth-bound) and "deep" (many small gradients: latency-bound). Scaling
is weak, as in data-parallel practice: each rank keeps its batch, the global batch grows with the
world. Contenders: bucketed = DataParallel (bucketed, overlapped with backward), naive =
DataParallelNaive (one blocking all-reduce per parameter after backward), compute-only = the same
rank's step on its shard with no communication, torch-ddp = DistributedDataParallel (file
rendezvous) when PyTorch is installed. Prints the tables and the targets as PASS/MISS lines.

``--device cuda``: every rank takes the GPU of its node-local rank, so 1-4 ranks on a one-GPU
machine share it (each on a CuPy stream of its own); scratchpar's gradients are all-reduced
from device buffers (staged through pinned host memory unless MPI is CUDA-aware). DDP runs on
the same GPU: NCCL where every rank has a GPU of its own, else gloo over CUDA tensors, since
NCCL refuses two ranks on one GPU (dp_worker.ddp_backend); the table names the backend.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
from pathlib import Path

from .device import add_argument as add_device_argument
from .device import describe, judged, staging
from .mpijob import JobFailed, per_world_size, run_module
from .table import format_table

CONFIGS = {"compute": {"sizes": [256, 512, 512, 10], "per_rank": [32, 64, 128, 256, 512],
                       "target": 128},
           "wide": {"sizes": [1024, 2048, 2048, 10], "per_rank": [4]},
           "deep": {"sizes": [64] * 33 + [10], "per_rank": [16]}}
QUICK_CONFIGS = {"compute": {"sizes": [32, 64, 64, 10], "per_rank": [4, 8], "target": 8},
                 "wide": {"sizes": [64, 256, 256, 10], "per_rank": [2]},
                 "deep": {"sizes": [8] * 6 + [4], "per_rank": [2]}}
COMM_CONFIGS = ("wide", "deep")
TARGET_RANKS = 2
EFFICIENCY_TARGET, RATIO_TARGET, DDP_TARGET = 0.90, 0.75, 1.8
JOB_TIMEOUT_S = 600
# GLOO_SOCKET_IFNAME: gloo's connections between ranks stay on the loopback interface
JOB_ENV = {"GLOO_SOCKET_IFNAME": "lo"}


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=lambda s: [int(n) for n in s.split(",")],
                        help="comma-separated world sizes (default 2,4; --quick: 2); each job "
                             "also times one device, rank 0 alone")
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per contender")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per contender first")
    parser.add_argument("--rounds", type=int, default=2,
                        help="run the world sizes this many times in turn, pooling the samples "
                             "(load that comes and goes then weighs on every world size)")
    parser.add_argument("--quick", action="store_true", help="tiny MLPs, 3 repeats (smoke test)")
    parser.add_argument("--json", metavar="PATH", help="also write every number to this file")
    add_device_argument(parser)


def exposed_fraction(step_s: float, compute_s: float) -> float:
    """(DP step − compute-only step) / DP step: the share of a step spent waiting on others."""
    return (step_s - compute_s) / step_s


def verdict(measured: float | None, target: float, higher_is_better: bool) -> str:
    if measured is None:
        return "n/a"
    return "PASS" if (measured >= target if higher_is_better else measured <= target) else "MISS"


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def jobs(configs: dict) -> dict[str, tuple[str, int]]:
    """Job name → (config, per-rank batch): "compute@128", or plain "wide" for a single batch."""
    return {(f"{name}@{b}" if len(c["per_rank"]) > 1 else name): (name, b)
            for name, c in configs.items() for b in c["per_rank"]}


def focus(configs: dict) -> list[str]:
    """The jobs the ratio, exposure and DDP tables show: the compute target and the comm MLPs."""
    target = configs["compute"]["target"]
    return [job for job, (name, b) in jobs(configs).items()
            if name in COMM_CONFIGS or (name == "compute" and b == target)]


def measure(n: int, configs: dict, repeats: int, warmup: int, ddp: bool, device: str,
            tmp: Path) -> dict:
    print(f"dp: n={n}", file=sys.stderr, flush=True)
    out = tmp / f"n{n}.json"
    specs = {job: {"sizes": configs[name]["sizes"], "batch": n * b, "ddp": ddp}
             for job, (name, b) in jobs(configs).items()}
    run_module(n, "scratchpar.bench.dp_worker",
               ["--configs", json.dumps(specs), "--repeats", str(repeats), "--warmup",
                str(warmup), "--out", str(out), "--device", device]
               + (["--ddp-file", str(tmp / f"ddp-rendezvous-n{n}")] if ddp else []),
               JOB_TIMEOUT_S, JOB_ENV)
    return json.loads(out.read_text())


def pool(rounds: list[dict]) -> dict:
    """One result per world size from several rounds: each contender's samples pooled, the
    median taken over all of them; the loss check is the first round's."""
    merged = rounds[0]
    for n, result in merged.items():
        for job, timed in result["configs"].items():
            for name, times in timed["contenders"].items():
                samples = [s for r in rounds for s in r[n]["configs"][job]["contenders"][name]
                           ["samples_s"]]
                times.update(samples_s=samples, median_s=float(statistics.median(samples)))
    return merged


def median(results: dict, n: int, job: str, contender: str) -> float | None:
    times = results[n]["configs"][job]["contenders"].get(contender)
    return times["median_s"] if times else None


BASELINE = {"bucketed": "alone", "naive": "alone", "compute-only": "alone",
            "torch-ddp": "torch-alone"}  # each contender's one-device step


def efficiency_of(results: dict, n: int, job: str, contender: str) -> float:
    """Weak scaling at n ranks: throughput n·b/t_n over n × one device's b/t₁, that is t₁/t_n,
    with t₁ the one-device step measured in the same job."""
    return median(results, n, job, BASELINE[contender]) / median(results, n, job, contender)


def throughput_rows(results: dict, configs: dict) -> list[list]:
    """Compute-bound MLP, weak scaling, one row per per-rank batch and contender: its ms per
    step and efficiency at each world size (one device's rows: its ms, no efficiency)."""
    rows = []
    for job, (name, b) in jobs(configs).items():
        if name != "compute":
            continue
        for contender in ("alone", "bucketed", "naive", "compute-only", "torch-alone",
                          "torch-ddp"):
            if median(results, min(results), job, contender) is None:
                continue
            row = [b, contender]
            for n in results:
                row += [1e3 * median(results, n, job, contender),
                        efficiency_of(results, n, job, contender) if contender in BASELINE
                        else None]
            rows.append(row)
    return rows


def throughput_headers(results: dict) -> list[str]:
    return ["per-rank batch", "contender"] + [
        h for n in results for h in (f"ms n={n}", f"efficiency n={n}")]


def ratio_rows(results: dict, configs: dict) -> list[list]:
    return [[job, n, 1e3 * median(results, n, job, "naive"),
             1e3 * median(results, n, job, "bucketed"),
             median(results, n, job, "bucketed") / median(results, n, job, "naive")]
            for job in focus(configs) for n in results]


def fraction_rows(results: dict, configs: dict) -> list[list]:
    rows = []
    for job in focus(configs):
        for n in results:
            compute = median(results, n, job, "compute-only")
            for name in ("bucketed", "naive"):
                t = median(results, n, job, name)
                rows.append([job, n, name, 1e3 * t, 1e3 * compute, exposed_fraction(t, compute)])
    return rows


def ddp_rows(results: dict, configs: dict) -> list[list]:
    rows, per_rank = [], {job: b for job, (_, b) in jobs(configs).items()}
    for job in focus(configs):
        for n in results:
            check = results[n]["configs"][job]["loss_check"]
            if check is None:
                continue
            ours, theirs = median(results, n, job, "bucketed"), median(results, n, job,
                                                                       "torch-ddp")
            rows.append([job, n, n * per_rank[job] / ours, n * per_rank[job] / theirs,
                         theirs / ours, f"{max(e['abs_err'] for e in check):.1e}"])
    return rows


def targets(results: dict, configs: dict, ddp: list, device: str) -> list[list]:
    """The issue's three targets at ``TARGET_RANKS`` ranks: one row per MLP they apply to."""
    at, target = TARGET_RANKS, f"compute@{configs['compute']['target']}"
    eff = efficiency_of(results, at, target, "bucketed") if at in results else None
    rows = [[f"scaling efficiency, bucketed, {target} ≥ {EFFICIENCY_TARGET}", eff, at,
             judged(device, verdict(eff, EFFICIENCY_TARGET, True))]]
    for job in COMM_CONFIGS:
        ratio = None if at not in results else \
            median(results, at, job, "bucketed") / median(results, at, job, "naive")
        rows.append([f"bucketed / naive step time, {job} ≤ {RATIO_TARGET}", ratio, at,
                     judged(device, verdict(ratio, RATIO_TARGET, False))])
    for job in focus(configs):
        speedup = next((r[4] for r in ddp if r[0] == job and r[1] == at), None)
        rows.append([f"scratchpar / torch DDP throughput, {job} ≥ {DDP_TARGET}", speedup, at,
                     judged(device, verdict(speedup, DDP_TARGET, True)) if ddp
                     else "n/a (torch missing)"])
    return rows


def models(configs: dict) -> str:
    return "; ".join(f"{name}: MLP {layers(c['sizes'])}, "
                     f"{'/'.join(map(str, c['per_rank']))} samples per rank"
                     for name, c in configs.items())


def layers(sizes: list[int]) -> str:
    """784-1024-10, or 64×33-10 for a run of equal widths."""
    parts, i = [], 0
    while i < len(sizes):
        j = i
        while j + 1 < len(sizes) and sizes[j + 1] == sizes[i]:
            j += 1
        run = sizes[i:j + 1]
        parts.append(f"{sizes[i]}×{len(run)}" if len(run) >= 3 else "-".join(map(str, run)))
        i = j + 1
    return "-".join(parts)


def run(args) -> int:
    configs = QUICK_CONFIGS if args.quick else CONFIGS
    repeats, warmup, rounds = (3, 1, 1) if args.quick else (args.repeats, args.warmup,
                                                            args.rounds)
    ranks = sorted(set(args.ranks or ([2] if args.quick else [2, 4])))
    if ranks[0] < 1 or rounds < 1:
        raise SystemExit(f"--ranks and --rounds must be positive, got {ranks} and {rounds}")
    ddp = torch_available()
    print(f"dp benchmark on {describe(args.device)}: float32, cross-entropy, SGD; "
          f"{models(configs)}; world sizes {ranks}; weak scaling: the global batch is ranks × "
          "per-rank batch")
    print(f"median of {rounds} × {repeats} steps per contender after {warmup} warm-up steps, "
          "taken in turns; each step starts at a barrier"
          + ("" if args.device == "cpu" else " and ends with a wait for the device")
          + "; time = slowest rank" + ("" if ddp else "; torch missing: no DDP"))
    try:
        measured = [per_world_size(ranks, lambda n, tmp: measure(n, configs, repeats, warmup,
                                                                 ddp, args.device, tmp))
                    for _ in range(rounds)]
    except JobFailed as failure:
        print(f"dp: {failure}", file=sys.stderr)
        return 1
    results = pool([r for r, _ in measured])
    load = (measured[0][1][0], measured[-1][1][1])
    first = results[ranks[0]]
    print(f"buffers: {staging(args.device, first['cuda_aware'])}")
    print(f"{first['malloc']} (all contenders); load average (1 min) before: "
          f"{load[0]:.2f}, after: {load[1]:.2f} on {os.cpu_count()} cores"
          + ("" if max(results) <= (os.cpu_count() or 1) else
             f"; n={max(results)} is oversubscribed, two ranks share a core"))
    print("\nthroughput, compute MLP, weak scaling: efficiency = n·b/t_n / (n · b/t₁) = t₁/t_n, "
          "t₁ = one device (rank 0 alone, the others asleep) in the same job\n"
          + format_table(throughput_headers(results), throughput_rows(results, configs)))
    print("\nbucketed against naive\n"
          + format_table(["MLP", "n", "naive ms", "bucketed ms", "bucketed/naive"],
                         ratio_rows(results, configs)))
    print("\nexposed communication = (DP step − compute-only step) / DP step\n"
          + format_table(["MLP", "n", "contender", "ms/step", "compute-only ms", "exposed"],
                         fraction_rows(results, configs)))
    ddp_table = ddp_rows(results, configs)
    if ddp_table:
        print(f"\nscratchpar (bucketed) against torch DDP ({first['ddp_backend']} backend); loss "
              "of the first steps checked first\n"
              + format_table(["MLP", "n", "scratchpar samples/s", "ddp samples/s",
                              "scratchpar/ddp", "loss abs err"], ddp_table))
    verdicts = targets(results, configs, ddp_table, args.device)
    print("\n" + format_table(["target", "measured", "n", "verdict"], verdicts))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": describe(args.device), "configs": configs,
                       "jobs": jobs(configs), "ranks": ranks,
                       "repeats": repeats, "warmup": warmup, "rounds": rounds, "load": load,
                       "per_world_size": {str(n): r for n, r in results.items()},
                       "targets": [dict(zip(["target", "measured", "n", "verdict"], t))
                                   for t in verdicts]}, f, indent=2)
    return 0
