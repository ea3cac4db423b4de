"""The branches benchmark's driver: one MPI job per world size, then the tables."""

from __future__ import annotations

import os

from ...comm.chunks import counts
from ..harness import Benchmark, describe
from ..mpijob import job, per_world_size
from ..table import table

CONFIG = {"features": 512, "sizes": [768, 768], "k": 4, "classes": 10, "batch": 256,
          "warmup": 2, "repeats": 30}
QUICK = {"features": 16, "sizes": [32, 16], "k": 3, "classes": 4, "batch": 8, "warmup": 1,
         "repeats": 2}
FLOAT32 = 4


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=lambda s: [int(n) for n in s.split(",")],
                        default=[1, 2], help="comma-separated world sizes (default 1,2); each "
                                             "job also times one device, rank 0 alone")


def param_formula(cfg: dict, towers: int) -> int:
    """Bytes of ``towers`` towers (each Linear: D_in·D_out + D_out) and the k·H → C head."""
    widths = [cfg["features"], *cfg["sizes"]]
    tower = sum(d * f + f for d, f in zip(widths[:-1], widths[1:]))
    head = cfg["k"] * cfg["sizes"][-1] * cfg["classes"] + cfg["classes"]
    return FLOAT32 * (towers * tower + head)


def timing_rows(results: dict, cfg: dict) -> list[dict]:
    """Per world size: both medians, the speed-up, and the ideal one if the head cost nothing
    (k over the most towers a rank holds)."""
    rows = []
    for n, r in results.items():
        alone, split = r["timed"]["alone"]["median_s"], r["timed"]["branches"]["median_s"]
        rows.append({"ranks": n, "towers_per_rank": "/".join(map(str, counts(cfg["k"], n))),
                     "alone_ms": 1e3 * alone, "branches_ms": 1e3 * split,
                     "speedup": alone / split, "ideal": cfg["k"] / max(counts(cfg["k"], n))})
    return rows


def memory_rows(results: dict, cfg: dict) -> list[dict]:
    """Per rank of each world size: parameter and activation bytes against one device's."""
    rows = []
    for n, r in results.items():
        one = r["one_device"]
        for rank, mine in enumerate(r["per_rank"]):
            rows.append({"ranks": n, "rank": rank, "towers": mine["towers"],
                         "param_bytes": mine["param_bytes"],
                         "param_formula": param_formula(cfg, mine["towers"]),
                         "param_share": mine["param_bytes"] / one["param_bytes"],
                         "activation_bytes": mine["activation_bytes"],
                         "activation_share": mine["activation_bytes"] / one["activation_bytes"],
                         "loss_diff": f"{abs(mine['loss'] - one['loss']):.1e}"})
    return rows


def measure(args) -> dict:
    cfg = QUICK if args.quick else CONFIG
    results, (before, after) = per_world_size(
        args.ranks, lambda n: job(n, "scratchpar.bench.branches.worker", cfg, args.device))
    one = next(iter(results.values()))["one_device"]
    timing, memory = timing_rows(results, cfg), memory_rows(results, cfg)
    widths = "→".join(map(str, [cfg["features"], *cfg["sizes"]]))
    print(f"branches benchmark on {describe(args.device)}, {os.cpu_count()} cores, one thread "
          f"per rank: Towers ({cfg['k']} towers {widths}, joined {cfg['k'] * cfg['sizes'][-1]} "
          f"→ head {cfg['classes']}), batch "
          f"{cfg['batch']}, float32; forward + backward (the input's gradient too), median of "
          f"{cfg['repeats']} after {cfg['warmup']} warm-up, contenders in turns; load average "
          f"(1 min) before {before:.2f}, after {after:.2f}")
    print(table("step time: alone = the single-device Towers on rank 0 (the others asleep) in "
                "the same job; speed-up = alone / branches; ideal = k / most towers on a rank",
                timing, {"ranks": "ranks", "towers/rank": "towers_per_rank",
                         "alone ms": "alone_ms", "branches ms": "branches_ms",
                         "speed-up": "speedup", "ideal": "ideal"}))
    print(table(f"held per rank, against one device ({one['param_bytes']} parameter B, "
                f"{one['activation_bytes']} activation B): parameters = its arrays (formula: "
                "k_r · tower + head); activations = the distinct buffers one forward's graph "
                "keeps for backward (tensors on it, arrays saved by its ops; input included, "
                "parameters not)", memory,
                {"ranks": "ranks", "rank": "rank", "towers": "towers", "param B": "param_bytes",
                 "formula B": "param_formula", "× one": "param_share",
                 "activation B": "activation_bytes", "× one ": "activation_share",
                 "|loss − one device's|": "loss_diff"}))
    return {"config": cfg, "ranks": args.ranks, "timing": timing, "memory": memory,
            "one_device": one, "load": [before, after]}


BENCHMARK = Benchmark("model parallelism over branches: a Towers step split over the ranks "
                      "against one device", "a tiny Towers", measure, add_arguments)
