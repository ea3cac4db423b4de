"""Time data parallelism: scaling, bucketed against naive, exposed communication, torch DDP.

One MPI job per world size runs every contender in turns on two MLPs: a compute-bound one
(throughput and scaling efficiency against one rank, and torch DistributedDataParallel when
PyTorch is installed) and a communication-heavy one (many parameters, a small batch). Contenders:
bucketed = DataParallel (bucketed, overlapped with backward), naive = DataParallelNaive (one
blocking all-reduce per parameter after backward), compute-only = the same rank's step on its
shard with no communication, torch-ddp = DistributedDataParallel (gloo, file rendezvous). Prints
the tables and the targets as PASS/MISS lines.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from .mpijob import JobFailed, per_world_size, run_module
from .table import format_table

CONFIGS = {"compute": {"sizes": [784, 1024, 1024, 10], "batch": 256, "ddp": True},
           "comm": {"sizes": [1024, 2048, 2048, 10], "batch": 8, "ddp": False}}
QUICK_CONFIGS = {"compute": {"sizes": [32, 64, 64, 10], "batch": 16, "ddp": True},
                 "comm": {"sizes": [64, 256, 256, 10], "batch": 4, "ddp": False}}
TARGET_RANKS = 2
EFFICIENCY_TARGET, RATIO_TARGET, DDP_TARGET = 0.90, 0.75, 1.8
JOB_TIMEOUT_S = 600
# GLOO_SOCKET_IFNAME: gloo's connections between ranks stay on the loopback interface
JOB_ENV = {"GLOO_SOCKET_IFNAME": "lo"}


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=lambda s: [int(n) for n in s.split(",")],
                        help="comma-separated world sizes; 1 is always added "
                             "(default 1,2,4; --quick: 1,2)")
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per contender")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per contender first")
    parser.add_argument("--quick", action="store_true", help="tiny MLPs, 3 repeats (smoke test)")
    parser.add_argument("--json", metavar="PATH", help="also write every number to this file")


def efficiency(throughput_p: float, p: int, throughput_1: float) -> float:
    """Scaling efficiency throughput_p / (p · throughput_1): 1 is perfect linear scaling."""
    return throughput_p / (p * throughput_1)


def exposed_fraction(step_s: float, compute_s: float) -> float:
    """(DP step − compute-only step) / DP step: the share of a step spent waiting on others."""
    return (step_s - compute_s) / step_s


def verdict(measured: float | None, target: float, higher_is_better: bool) -> str:
    if measured is None:
        return "n/a"
    return "PASS" if (measured >= target if higher_is_better else measured <= target) else "MISS"


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def measure(n: int, configs: dict, repeats: int, warmup: int, ddp: bool, tmp: Path) -> dict:
    print(f"dp: n={n}", file=sys.stderr, flush=True)
    out = tmp / f"n{n}.json"
    run_module(n, "scratchpar.bench.dp_worker",
               ["--configs", json.dumps(configs), "--repeats", str(repeats), "--warmup",
                str(warmup), "--out", str(out)]
               + (["--ddp-file", str(tmp / f"ddp-rendezvous-n{n}")] if ddp else []),
               JOB_TIMEOUT_S, JOB_ENV)
    return json.loads(out.read_text())


def median(results: dict, n: int, config: str, contender: str) -> float | None:
    times = results[n]["configs"][config]["contenders"].get(contender)
    return times["median_s"] if times else None


def throughput_rows(results: dict, configs: dict) -> list[list]:
    """Compute-bound MLP: samples/s of each contender and its efficiency against one rank."""
    batch, rows = configs["compute"]["batch"], []
    for name in ("bucketed", "naive", "torch-ddp"):
        if median(results, 1, "compute", name) is None:
            continue
        one = batch / median(results, 1, "compute", name)
        for n in results:
            t = median(results, n, "compute", name)
            note = f"oversubscribed: {n} ranks on {os.cpu_count()} cores" \
                if n > (os.cpu_count() or 1) else ""
            rows.append([n, name, 1e3 * t, batch / t, efficiency(batch / t, n, one), note])
    return rows


def ratio_rows(results: dict) -> list[list]:
    return [[config, n, 1e3 * median(results, n, config, "naive"),
             1e3 * median(results, n, config, "bucketed"),
             median(results, n, config, "bucketed") / median(results, n, config, "naive")]
            for config in ("comm", "compute") for n in results if n > 1]


def fraction_rows(results: dict) -> list[list]:
    rows = []
    for config in ("compute", "comm"):
        for n in results:
            compute = median(results, n, config, "compute-only")
            for name in ("bucketed", "naive"):
                t = median(results, n, config, name)
                rows.append([config, n, name, 1e3 * t, 1e3 * compute,
                             exposed_fraction(t, compute)])
    return rows


def ddp_rows(results: dict, batch: int) -> list[list]:
    rows = []
    for n, res in results.items():
        check = res["configs"]["compute"]["loss_check"]
        if check is None:
            continue
        ours, theirs = median(results, n, "compute", "bucketed"), median(results, n, "compute",
                                                                         "torch-ddp")
        rows.append([n, batch / ours, batch / theirs, theirs / ours,
                     f"{max(c['rel_err'] for c in check):.1e}"])
    return rows


def targets(results: dict, throughput: list, ratios: list, ddp: list) -> list[list]:
    at = TARGET_RANKS
    eff = next((r[4] for r in throughput if r[0] == at and r[1] == "bucketed"), None)
    ratio = next((r[4] for r in ratios if r[0] == "comm" and r[1] == at), None)
    speedup = next((r[3] for r in ddp if r[0] == at), None)
    return [[f"scaling efficiency, bucketed, compute MLP ≥ {EFFICIENCY_TARGET}", eff, at,
             verdict(eff, EFFICIENCY_TARGET, True)],
            [f"bucketed / naive step time, comm MLP ≤ {RATIO_TARGET}", ratio, at,
             verdict(ratio, RATIO_TARGET, False)],
            [f"scratchpar / torch DDP throughput, compute MLP ≥ {DDP_TARGET}", speedup, at,
             verdict(speedup, DDP_TARGET, True) if ddp else "n/a (torch missing)"]]


def describe(configs: dict) -> str:
    return "; ".join(f"{name}: MLP {'-'.join(map(str, c['sizes']))}, global batch {c['batch']}"
                     for name, c in configs.items())


def run(args) -> int:
    configs = QUICK_CONFIGS if args.quick else CONFIGS
    repeats, warmup = (3, 1) if args.quick else (args.repeats, args.warmup)
    ranks = sorted({1, *(args.ranks or ([1, 2] if args.quick else [1, 2, 4]))})
    if any(configs[c]["batch"] % n for c in configs for n in ranks):
        raise SystemExit(f"--ranks: every world size must divide the batches ({describe(configs)})")
    ddp = torch_available()
    print(f"dp benchmark: float32, cross-entropy, SGD; {describe(configs)}; world sizes {ranks}")
    print(f"median of {repeats} steps per contender after {warmup} warm-up steps, taken in turns; "
          "each step starts at a barrier; time = slowest rank"
          + ("" if ddp else "; torch missing: no DDP"))
    try:
        results, load = per_world_size(
            ranks, lambda n, tmp: measure(n, configs, repeats, warmup, ddp, tmp))
    except JobFailed as failure:
        print(f"dp: {failure}", file=sys.stderr)
        return 1
    print(f"{results[1]['malloc']} (all contenders); load average (1 min) before: {load[0]:.2f}, "
          f"after: {load[1]:.2f} on {os.cpu_count()} cores")
    throughput = throughput_rows(results, configs)
    print("\nthroughput, compute MLP (efficiency = throughput_p / (p · throughput_1))\n"
          + format_table(["n", "contender", "ms/step", "samples/s", "efficiency", "note"],
                         throughput))
    ratios = ratio_rows(results)
    print("\nbucketed against naive\n"
          + format_table(["config", "n", "naive ms", "bucketed ms", "bucketed/naive"], ratios))
    fractions = fraction_rows(results)
    print("\nexposed communication = (DP step − compute-only step) / DP step\n"
          + format_table(["config", "n", "contender", "ms/step", "compute-only ms", "exposed"],
                         fractions))
    ddp_table = ddp_rows(results, configs["compute"]["batch"])
    if ddp_table:
        print("\nscratchpar (bucketed) against torch DDP, compute MLP; loss of the first steps "
              "checked first\n" + format_table(["n", "scratchpar samples/s", "ddp samples/s",
                                                "scratchpar/ddp", "loss rel err"], ddp_table))
    verdicts = targets(results, throughput, ratios, ddp_table)
    print("\n" + format_table(["target", "measured", "n", "verdict"], verdicts))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"configs": configs, "ranks": ranks, "repeats": repeats, "warmup": warmup,
                       "load": load, "per_world_size": {str(n): r for n, r in results.items()},
                       "targets": [dict(zip(["target", "measured", "n", "verdict"], t))
                                   for t in verdicts]}, f, indent=2)
    return 0
