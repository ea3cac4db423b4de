"""Measure the asynchronous strategies: Hogwild's speed-up and colliding writes, EASGD against
Downpour as τ grows, and the round-robin EASGD master's time.

Three MPI jobs (``--ranks N``: the most processes that compute at once, default 2, this
machine's cores; DESIGN.md §4):

1. Hogwild (Niu et al. 2011) on sparse logistic regression, matrix factorization and a dense
   MLP, in one job of N ranks: serial SGD (a plain loop on one process), Hogwild at 1, 2, 4 …
   N processes and the locked variant at each P ≥ 2 take turns on the same samples (update u
   reads samples [u·b, (u+1)·b); at P processes worker r makes updates r, r + P, …, each a
   plain SGD step γ = η on its b samples, serial SGD's step), the ranks a contender does not
   use napping at a barrier. Each contender runs ``rounds`` times, in reverse order every other
   round, and the tables take its median round. Speed-up is over Hogwild at 1 process (serial
   SGD bit for bit, its reads and writes sparse), and beside it over the plain loop. Rank 0
   copies θ every few steps (racing the writers) and evaluates the copies afterwards:
   held-out loss against wall-clock. Then lock-free Hogwild runs again, instrumented
   (bench/async_collisions.py), and counts its colliding writes.
2. Asynchronous EASGD exchanging every τ steps against Downpour pushing and fetching every τ
   steps (Zhang, Choromanska & LeCun 2015, §5's stability claim), 1 master + 3 workers, same
   batches, rate and initial model; the master's parameters (EASGD's centre, Downpour's
   server) are copied every few steps and evaluated afterwards.
3. Round-robin EASGD (seed 001's Algorithm 1): the master's wall time split into packing and
   sending, waiting for the worker and the eq.-4 update, at G = 1 … max(3, N − 1) workers, the
   workers' compute real up to N ranks and, everywhere, the sleep of the real MLP's time
   calibrated here (ranks beyond the cores then hold none while they compute).

``--figures DIR`` writes async_hogwild_speedup.png, async_hogwild_loss.png, async_easgd_tau.png
and async_round_robin_busy.png.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from . import async_report as report
from .async_tables import print_tables
from .device import add_argument as add_device_argument
from .device import describe
from .figures import draw_figures
from .mpijob import JobFailed, per_world_size, run_part
from .ps_standin import calibrate

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
JOB_TIMEOUT_S = 600


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=int, default=2,
                        help="the most processes that compute at once (default 2, this "
                             "machine's cores): Hogwild at 1, 2, 4 … N, round-robin EASGD with "
                             "real compute up to N ranks (4–8 on a bigger machine)")
    parser.add_argument("--quick", action="store_true", help="a few steps of each (smoke test)")
    parser.add_argument("--json", metavar="PATH", help="also write every number to this file")
    parser.add_argument("--figures", metavar="DIR", help="write the four figures here")
    add_device_argument(parser)


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


def job(part: str, n: int, cfg: dict, tmp: Path, device: str) -> dict:
    return run_part(n, "scratchpar.bench.async_worker", part, cfg, tmp, device, JOB_TIMEOUT_S)


def run_jobs(cfgs: dict, ranks: int, device: str) -> tuple[dict, tuple]:
    """The three jobs' results, and the load average before the first and after the last."""
    sizes = {"hogwild": ranks, "tau": 1 + cfgs["tau"]["workers"],
             "round_robin": 1 + max(g for g, _ in cfgs["round_robin"]["runs"])}
    out, load = {}, []
    for part, n in sizes.items():
        done, (before, after) = per_world_size(
            [n], lambda n, tmp, part=part: job(part, n, cfgs[part], tmp, device))
        out[part] = done[n]
        load += [before, after]
    return out, (load[0], load[-1])


def rows_of(parts: dict, cfgs: dict) -> dict:
    hogwild = report.hogwild_rows(parts["hogwild"], cfgs["hogwild"]["contenders"],
                                  cfgs["hogwild"]["batch"])
    return {"hogwild": hogwild, "verdict": report.verdict(hogwild),
            "collisions": report.collision_rows(parts["hogwild"]),
            "tau": report.tau_rows(parts["tau"]["runs"], cfgs["tau"]["taus"]),
            "round_robin": report.round_robin_rows(parts["round_robin"])}


def draw(directory: str, parts: dict, rows: dict, cfgs: dict) -> list[str]:
    from ..trace import async_plot as plot

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


def run(args) -> int:
    if args.ranks < 2:
        print(f"async: --ranks must be ≥ 2, got {args.ranks}", file=sys.stderr)
        return 2
    cfgs, calib = configs(args.quick, args.ranks)
    try:
        parts, (before, after) = run_jobs(cfgs, args.ranks, args.device)
    except JobFailed as failure:
        print(f"async: {failure}", file=sys.stderr)
        return 1
    rows = rows_of(parts, cfgs)
    print(f"asynchronous benchmark on {describe(args.device)}, {os.cpu_count()} cores, one "
          f"thread per rank; load average (1 min) before {before:.2f}, after {after:.2f}")
    print(f"stand-in compute (round-robin): MLP "
          f"{'→'.join(map(str, [MLP['n_features'], *MLP['hidden'], MLP['n_classes']]))} "
          f"(K = {calib['parameters']:,}) calibrated on the CPU at {calib['rows']} rows: "
          f"{1e6 * calib['per_row_s']:.2f} µs per row")
    print_tables(rows, cfgs, parts, args.device)
    figures = draw_figures(args.figures, draw, parts, rows, cfgs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": describe(args.device), "cores": os.cpu_count(),
                       "quick": args.quick, "ranks": args.ranks, "config": cfgs,
                       "calibration": calib, "load": [before, after], **rows,
                       "results": parts, "figures": figures}, f, separators=(",", ":"))
    return 0
