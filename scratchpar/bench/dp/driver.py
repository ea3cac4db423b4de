"""The data-parallel benchmark's driver: one MPI job per world size and round, then the tables."""

from __future__ import annotations

import importlib.util
import os
import statistics
import tempfile

from ..harness import Benchmark, describe, staging
from ..mpijob import job, per_world_size
from ..table import format_table
from .report import (
    ddp_rows,
    fraction_rows,
    jobs,
    layers,
    ratio_rows,
    targets,
    throughput_headers,
    throughput_rows,
)

CONFIGS = {"compute": {"sizes": [256, 512, 512, 10], "per_rank": [32, 64, 128, 256, 512],
                       "target": 128},
           "wide": {"sizes": [1024, 2048, 2048, 10], "per_rank": [4]},
           "deep": {"sizes": [64] * 33 + [10], "per_rank": [16]}}
QUICK_CONFIGS = {"compute": {"sizes": [32, 64, 64, 10], "per_rank": [4, 8], "target": 8},
                 "wide": {"sizes": [64, 256, 256, 10], "per_rank": [2]},
                 "deep": {"sizes": [8] * 6 + [4], "per_rank": [2]}}
JOB_ENV = {"GLOO_SOCKET_IFNAME": "lo"}  # gloo's connections between ranks stay on loopback


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=lambda s: [int(n) for n in s.split(",")],
                        help="comma-separated world sizes (default 2,4; --quick: 2); each job "
                             "also times one device, rank 0 alone")
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per contender")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per contender first")
    parser.add_argument("--rounds", type=int, default=2,
                        help="run the world sizes this many times in turn, pooling the samples "
                             "(load that comes and goes then weighs on every world size)")


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def pool(rounds: list[dict]) -> dict:
    """One result per world size from several rounds: each contender's samples pooled, the
    median taken over all of them; the loss check is the first round's."""
    merged = rounds[0]
    for n, result in merged.items():
        for job_name, timed in result["configs"].items():
            for name, times in timed["contenders"].items():
                samples = [s for r in rounds for s in r[n]["configs"][job_name]["contenders"]
                           [name]["samples_s"]]
                times.update(samples_s=samples, median_s=float(statistics.median(samples)))
    return merged


def measure(args) -> dict:
    configs = QUICK_CONFIGS if args.quick else CONFIGS
    repeats, warmup, rounds = (3, 1, 1) if args.quick else (args.repeats, args.warmup,
                                                            args.rounds)
    ranks = sorted(set(args.ranks or ([2] if args.quick else [2, 4])))
    if ranks[0] < 1 or rounds < 1:
        raise SystemExit(f"--ranks and --rounds must be positive, got {ranks} and {rounds}")
    ddp = torch_available()
    print(f"dp benchmark on {describe(args.device)}: float32, cross-entropy, SGD; "
          + "; ".join(f"{name}: MLP {layers(c['sizes'])}, "
                      f"{'/'.join(map(str, c['per_rank']))} samples per rank"
                      for name, c in configs.items())
          + f"; world sizes {ranks}; weak scaling: the global batch is ranks × per-rank batch")
    print(f"median of {rounds} × {repeats} steps per contender after {warmup} warm-up steps, "
          "taken in turns; each step starts at a barrier"
          + ("" if args.device == "cpu" else " and ends with a wait for the device")
          + "; time = slowest rank" + ("" if ddp else "; torch missing: no DDP"))
    with tempfile.TemporaryDirectory(prefix="scratchpar-ddp-") as rendezvous:
        def world(n: int, r: int) -> dict:
            specs = {name: {"sizes": configs[config]["sizes"], "batch": n * b, "ddp": ddp}
                     for name, (config, b) in jobs(configs).items()}
            return job(n, "scratchpar.bench.dp.worker", {
                "configs": specs, "repeats": repeats, "warmup": warmup,
                "ddp_file": f"{rendezvous}/n{n}-round{r}" if ddp else None}, args.device, JOB_ENV)

        measured = [per_world_size(ranks, lambda n, r=r: world(n, r)) for r in range(rounds)]
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
    return {"configs": configs, "jobs": jobs(configs), "ranks": ranks, "repeats": repeats,
            "warmup": warmup, "rounds": rounds, "load": load,
            "per_world_size": {str(n): r for n, r in results.items()},
            "targets": [dict(zip(["target", "measured", "n", "verdict"], t)) for t in verdicts]}


BENCHMARK = Benchmark("data parallelism: scaling against one rank, bucketed against naive, "
                      "exposed communication, torch DDP", "tiny MLPs, 3 repeats", measure,
                      add_arguments)
