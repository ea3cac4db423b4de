"""The asynchronous benchmark: three parts, each an MPI job, then the tables."""

from __future__ import annotations

import os
from pathlib import Path

from ..harness import Benchmark, describe, draw_figures, judged, machine
from ..mpijob import job
from ..standin import calibrate
from ..table import table
from . import report

MLP = {"n_features": 32, "hidden": [64], "n_classes": 10}
PROBLEMS = {"sparse-logreg": {"n_features": 512, "nnz": 8, "lr": 1.0},
            "matrix-factorization": {"n_users": 100, "n_items": 100, "rank": 4, "noise": 0.1,
                                     "lr": 0.3},
            "dense-mlp": {**MLP, "lr": 0.05}}
HOGWILD = {"problems": PROBLEMS, "batch": 4, "updates": 8000, "snapshots": 32, "rounds": 5,
           "eval_rows": 1024, "eval_batches": 2}
TAU = {"problem": {"name": "dense-mlp", **MLP}, "workers": 3, "lr": 0.1, "beta": 0.9,
       "batch": 8, "steps": 768, "taus": [1, 4, 16, 64], "snapshots": 24, "eval_rows": 1024,
       "eval_batches": 2}
ROUND_ROBIN = {"problem": {"name": "dense-mlp", **MLP}, "lr": 0.1, "rho": 3.0, "batch": 32,
               "steps": 2000}
QUICK_HOGWILD = {**HOGWILD, "updates": 200, "snapshots": 4, "rounds": 1, "eval_rows": 128,
                 "eval_batches": 1}
QUICK_TAU = {**TAU, "steps": 16, "taus": [1, 4], "snapshots": 4, "eval_rows": 128,
             "eval_batches": 1}
QUICK_ROUND_ROBIN = {**ROUND_ROBIN, "steps": 12}
PARTS = {"hogwild": "hogwild:hogwild_part", "tau": "easgd:tau_part",
         "round_robin": "easgd:round_robin_part"}  # the functions of the jobs


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=int, default=2,
                        help="the most processes that compute at once (default 2, this "
                             "machine's cores): Hogwild at 1, 2, 4 … N, round-robin EASGD with "
                             "real compute up to N ranks (4–8 on a bigger machine)")


def processes(ranks: int) -> list[int]:
    """Hogwild's process counts: 1, 2, 4 … up to ``ranks``, and ``ranks`` itself."""
    counts = [1]
    while counts[-1] * 2 <= ranks:
        counts.append(counts[-1] * 2)
    return counts + ([ranks] if counts[-1] != ranks else [])


def configs(quick: bool, ranks: int) -> tuple[dict, dict]:
    """Each job's config (contenders named, the stand-in calibrated) and the calibration."""
    counts = processes(ranks)
    hogwild = {**(QUICK_HOGWILD if quick else HOGWILD), "collisions": counts[1:],
               "contenders": [{"key": "serial", "processes": 1, "mode": "serial"}]
               + [{"key": f"hogwild{p}", "processes": p, "mode": "hogwild"} for p in counts]
               + [{"key": f"locked{p}", "processes": p, "mode": "locked"} for p in counts[1:]]}
    rr = QUICK_ROUND_ROBIN if quick else ROUND_ROBIN
    p = rr["problem"]
    calib = calibrate([p["n_features"], *p["hidden"], p["n_classes"]], rr["batch"])
    workers = range(1, max(3, ranks - 1) + 1)
    rr = {**rr, "per_row_s": calib["per_row_s"], "forward_share": calib["forward_share"],
          "runs": [(g, compute) for g in workers for compute in ("real", "stand-in")
                   if compute == "stand-in" or g + 1 <= ranks]}
    return {"hogwild": hogwild, "tau": QUICK_TAU if quick else TAU, "round_robin": rr}, calib


def run_jobs(cfgs: dict, ranks: int, device: str) -> tuple[dict, tuple]:
    """The three jobs' results, and the load average before the first and after the last."""
    sizes = {"hogwild": ranks, "tau": 1 + cfgs["tau"]["workers"],
             "round_robin": 1 + max(g for g, _ in cfgs["round_robin"]["runs"])}
    before = os.getloadavg()[0]
    out = {part: job(n, f"scratchpar.bench.asynchronous.{PARTS[part]}", cfgs[part], device)
           for part, n in sizes.items()}
    return out, (before, os.getloadavg()[0])


def rows_of(parts: dict, cfgs: dict) -> dict:
    hogwild = report.hogwild_rows(parts["hogwild"], cfgs["hogwild"]["contenders"],
                                  cfgs["hogwild"]["batch"])
    return {"hogwild": hogwild, "verdict": report.verdict(hogwild),
            "collisions": report.collision_rows(parts["hogwild"]),
            "tau": report.tau_rows(parts["tau"]["runs"], cfgs["tau"]["taus"]),
            "round_robin": report.round_robin_rows(parts["round_robin"])}


def draw(directory: str, parts: dict, rows: dict, cfgs: dict) -> list[str]:
    from . import plot

    out = Path(directory)
    names = {c["key"]: report.contender_name(c) for c in cfgs["hogwild"]["contenders"]}
    curves = {problem: {names[k]: [(s, loss) for s, _, loss in run["curve"]]
                        for k, run in report.typical(r["runs"]).items()}
              for problem, r in parts["hogwild"].items()}
    floors = {problem: r["floor"] for problem, r in parts["hogwild"].items()}
    levels = {problem: report.target(r) for problem, r in parts["hogwild"].items()}
    return [plot.plot_speedup(rows["hogwild"], rows["collisions"], report.TARGET,
                              str(out / "async_hogwild_speedup.png")),
            plot.plot_hogwild_loss(curves, floors, levels, str(out / "async_hogwild_loss.png")),
            plot.plot_easgd_tau(parts["tau"]["runs"], cfgs["tau"]["taus"],
                                parts["tau"]["floor"], str(out / "async_easgd_tau.png")),
            plot.plot_round_robin(rows["round_robin"], str(out / "async_round_robin_busy.png"))]


def print_tables(rows: dict, cfgs: dict, parts: dict, device: str) -> None:
    """Every part's tables (docs/hogwild.md and docs/easgd.md, Measurements)."""
    cfg, v = cfgs["hogwild"], rows["verdict"]
    rates = ", ".join(f"{p} η = {c['lr']}" for p, c in cfg["problems"].items())
    print(table(f"1. Hogwild against serial SGD: {cfg['updates']} updates of b = {cfg['batch']}, "
                f"{rates}; each contender's median round of {cfg['rounds']}", rows["hogwild"],
                {"problem": "problem", "contender": "contender", "P": "processes",
                 "updates": "updates", "run s": "seconds", "spread": "spread",
                 "ranks s": "per_rank", "updates/s": "updates_per_s", "samples/s": "samples_per_s",
                 "× 1 proc": "vs_one", "× serial loop": "vs_loop", "final held-out": "{final:.4f}",
                 "target": "{level:.4f}", "s to target": "to_level",
                 "× 1 proc to target": "level_vs_one"}))
    speedups, loop = (", ".join(f"{p} {s:.2f}×" for p, s in v[k].items())
                      for k in ("speedups", "over_loop"))
    met = f"{'met' if v['met'] else 'not met'} ({speedups}; over the plain serial loop {loop})"
    print(f"\ntarget (docs/hogwild.md): Hogwild ×2 ≥ {v['target']}× Hogwild ×1 (serial SGD) on "
          f"a sparse problem: {judged(device, met)}")
    print(table("2. colliding writes of lock-free Hogwild (instrumented, untimed)",
                rows["collisions"],
                {"problem": "problem", "P": "processes", "writes": "writes",
                 "colliding writes": "{colliding:.3f}", "coordinates/write": "coordinates",
                 "colliding coordinates": "{colliding_coordinates:.3f}",
                 "per parameter": "parameters"}))
    cfg = cfgs["tau"]
    print(table(f"3. asynchronous EASGD against Downpour as the communication period τ grows: "
                f"1 master + {cfg['workers']} workers, {cfg['steps']} steps each", rows["tau"],
                {"τ": "tau", "EASGD final": "{easgd_final:.3f}", "EASGD peak": "{easgd_peak:.3f}",
                 "EASGD stable": "easgd_stable", "exchanges": "easgd_exchanges",
                 "Downpour final": "{downpour_final:.3f}",
                 "Downpour peak": "{downpour_peak:.3f}", "Downpour stable": "downpour_stable",
                 "pushes": "downpour_exchanges", "Downpour / EASGD": "ratio"}))
    initial = parts["tau"]["runs"][f"easgd {cfg['taus'][0]}"]["curve"][0][1]
    print(f"\nstability: initial held-out loss {initial:.3f}; from τ = {cfg['taus'][0]} to τ = "
          f"{cfg['taus'][-1]} EASGD's final loss changes ×{report.drift(rows['tau'], 'easgd'):.2f}"
          f", Downpour's ×{report.drift(rows['tau'], 'downpour'):.2f}")
    cfg = cfgs["round_robin"]
    print(table(f"4. round-robin EASGD's master as the workers G grow: {cfg['steps']} steps of "
                f"b = {cfg['batch']}; shares of its wall time", rows["round_robin"],
                {"G": "workers", "compute": "compute", "ranks": "ranks", "steps": "steps",
                 "steps/s": "steps_per_s", "ms/step": "ms", "busy": "busy", "pack": "pack",
                 "update": "update", "wait": "wait", "other": "other"}))


def measure(args) -> dict:
    if args.ranks < 2:
        raise SystemExit(f"async: --ranks must be ≥ 2, got {args.ranks}")
    cfgs, calib = configs(args.quick, args.ranks)
    parts, load = run_jobs(cfgs, args.ranks, args.device)
    rows = rows_of(parts, cfgs)
    print(f"asynchronous benchmark on {describe(args.device)}, {machine(load)}")
    print(f"stand-in compute (round-robin): MLP "
          f"{'→'.join(map(str, [MLP['n_features'], *MLP['hidden'], MLP['n_classes']]))} "
          f"(K = {calib['parameters']:,}) calibrated on the CPU at {calib['rows']} rows: "
          f"{1e6 * calib['per_row_s']:.2f} µs per row")
    print_tables(rows, cfgs, parts, args.device)
    figures = draw_figures(args.figures, draw, parts, rows, cfgs)
    return {"cores": os.cpu_count(), "ranks": args.ranks, "config": cfgs, "calibration": calib,
            "load": list(load), **rows, "results": parts, "figures": figures}


BENCHMARK = Benchmark("the asynchronous strategies: Hogwild's speed-up and colliding writes, "
                      "EASGD against Downpour as τ grows, the round-robin master",
                      "a few steps of each", measure, add_arguments, indent=None,
                      figures="async_hogwild_speedup.png, async_hogwild_loss.png, "
                              "async_easgd_tau.png and async_round_robin_busy.png")
