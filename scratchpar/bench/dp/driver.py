"""The data-parallel benchmark: one MPI job per world size and round, then the tables."""

from __future__ import annotations

import importlib.util
import os
import statistics
import tempfile

from ...jobs.harness import Benchmark, describe, ints, machine, staging
from ...jobs.mpijob import job
from ...table import table
from .report import focus_rows, jobs, layers, targets, throughput_rows

CONFIGS = {"compute": {"sizes": [256, 512, 512, 10], "per_rank": [32, 64, 128, 256, 512],
                       "target": 128},
           "wide": {"sizes": [1024, 2048, 2048, 10], "per_rank": [4]},
           "deep": {"sizes": [64] * 33 + [10], "per_rank": [16]}}
QUICK_CONFIGS = {"compute": {"sizes": [32, 64, 64, 10], "per_rank": [4, 8], "target": 8},
                 "wide": {"sizes": [64, 256, 256, 10], "per_rank": [2]},
                 "deep": {"sizes": [8] * 6 + [4], "per_rank": [2]}}
TIMING, QUICK_TIMING = {"repeats": 20, "warmup": 3}, {"repeats": 3, "warmup": 1}
JOB_ENV = {"GLOO_SOCKET_IFNAME": "lo"}  # gloo's connections between ranks stay on loopback


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=ints, help="comma-separated world sizes (default 2,4; "
                        "--quick: 2); each job also times one device, rank 0 alone")
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
    configs, timing = (QUICK_CONFIGS, QUICK_TIMING) if args.quick else (CONFIGS, TIMING)
    rounds = 1 if args.quick else args.rounds
    ranks = sorted(set(args.ranks or ([2] if args.quick else [2, 4])))
    if ranks[0] < 1 or rounds < 1:
        raise SystemExit(f"--ranks and --rounds must be positive, got {ranks} and {rounds}")
    ddp = torch_available()
    print(f"dp benchmark on {describe(args.device)}: float32, cross-entropy, SGD; "
          + "; ".join(f"{name}: MLP {layers(c['sizes'])}, "
                      f"{'/'.join(map(str, c['per_rank']))} samples per rank"
                      for name, c in configs.items())
          + f"; world sizes {ranks}; weak scaling: the global batch is ranks × per-rank batch")
    print(f"median of {rounds} × {timing['repeats']} steps per contender after "
          f"{timing['warmup']} warm-up steps, taken in turns; each step starts at a barrier"
          + ("" if args.device == "cpu" else " and ends with a wait for the device")
          + "; time = slowest rank" + ("" if ddp else "; torch missing: no DDP"))
    with tempfile.TemporaryDirectory(prefix="scratchpar-ddp-") as rendezvous:
        def world(n: int, r: int) -> dict:
            specs = {name: {"sizes": configs[config]["sizes"], "batch": n * b}
                     for name, (config, b) in jobs(configs).items()}
            return job(n, "scratchpar.bench.dp.worker:measure_ranks", {
                "configs": specs, **timing,
                "ddp_file": f"{rendezvous}/n{n}-round{r}" if ddp else None}, args.device, JOB_ENV)

        results = pool([{n: world(n, r) for n in ranks} for r in range(rounds)])
    first = results[ranks[0]]
    print(f"buffers: {staging(args.device, first['cuda_aware'])}")
    print(f"{first['malloc']} (all contenders); {machine(args)}"
          + ("" if max(results) <= (os.cpu_count() or 1) else
             f"; n={max(results)} is oversubscribed, two ranks share a core"))
    print(table("throughput, compute MLP, weak scaling: efficiency t₁/t_n (docs/data_parallel.md, "
                "Measured)", throughput_rows(results, jobs(configs))))
    steps, ddp = focus_rows(results, configs)
    print(table("bucketed against naive, and the exposed communication = (DP step − compute-only "
                "step) / DP step", steps))
    if ddp:
        backends = ", ".join(f"{results[n]['ddp_backend']} at N={n}" for n in ranks)
        print(table(f"scratchpar (bucketed) against torch DDP ({backends}), the first steps' "
                    "losses checked first", ddp))
    verdicts = targets(results, configs, steps, ddp, args.device)
    print(table("targets (docs/data_parallel.md, Measured)", verdicts))
    return {"configs": configs, "jobs": jobs(configs), "ranks": ranks, "rounds": rounds, **timing,
            "per_world_size": {str(n): r for n, r in results.items()}, "targets": verdicts}


BENCHMARK = Benchmark("data parallelism: scaling against one rank, bucketed against naive, "
                      "exposed communication, torch DDP", "tiny MLPs, 3 repeats", measure,
                      add_arguments)
