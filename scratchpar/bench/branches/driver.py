"""The branches benchmark: one MPI job per world size, then the tables."""

from __future__ import annotations

from ...comm.chunks import counts
from ..harness import Benchmark, describe, ints, machine
from ..mpijob import job, per_world_size
from ..table import table

CONFIG = {"features": 512, "sizes": [768, 768], "k": 4, "classes": 10, "batch": 256,
          "warmup": 2, "repeats": 30}
QUICK = {"features": 16, "sizes": [32, 16], "k": 3, "classes": 4, "batch": 8, "warmup": 1,
         "repeats": 2}
FLOAT32 = 4


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=ints, default=[1, 2],
                        help="comma-separated world sizes (default 1,2); each job also times "
                             "one device, rank 0 alone")


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
    results, load = per_world_size(
        args.ranks, lambda n: job(n, "scratchpar.bench.branches.worker:measure", cfg, args.device))
    one = next(iter(results.values()))["one_device"]
    timing, memory = timing_rows(results, cfg), memory_rows(results, cfg)
    widths = "→".join(map(str, [cfg["features"], *cfg["sizes"]]))
    print(f"branches benchmark on {describe(args.device)}, {machine(load)}: Towers ({cfg['k']} "
          f"towers {widths}, joined {cfg['k'] * cfg['sizes'][-1]} → head {cfg['classes']}), "
          f"batch {cfg['batch']}, float32; forward + backward, median of {cfg['repeats']} after "
          f"{cfg['warmup']} warm-up")
    print(table("step time against one device (docs/tensor_parallel.md, Measurements)", timing,
                {"ranks": "ranks", "towers/rank": "towers_per_rank", "alone ms": "alone_ms",
                 "branches ms": "branches_ms", "speed-up": "speedup", "ideal": "ideal"}))
    print(table(f"held per rank, against one device ({one['param_bytes']} parameter B, "
                f"{one['activation_bytes']} activation B)", memory,
                {"ranks": "ranks", "rank": "rank", "towers": "towers", "param B": "param_bytes",
                 "formula B": "param_formula", "× one": "param_share",
                 "activation B": "activation_bytes", "× one ": "activation_share",
                 "|loss − one device's|": "loss_diff"}))
    return {"config": cfg, "ranks": args.ranks, "timing": timing, "memory": memory,
            "one_device": one, "load": list(load)}


BENCHMARK = Benchmark("model parallelism over branches: a Towers step split over the ranks "
                      "against one device", "a tiny Towers", measure, add_arguments)
