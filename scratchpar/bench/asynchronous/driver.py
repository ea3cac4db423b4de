"""The asynchronous benchmark: three parts, each an MPI job, then their rows, target and tables."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from ...jobs.harness import Benchmark, describe, draw_figures, machine
from ...jobs.mpijob import job
from ...table import table
from ..standin import calibrated
from .problems import SPARSE

MLP = {"n_features": 32, "hidden": [64], "n_classes": 10}
SIZES = [MLP["n_features"], *MLP["hidden"], MLP["n_classes"]]  # the MLP's layer widths
CONFIGS = {
    "hogwild": {"problems": {"sparse-logreg": {"n_features": 512, "nnz": 8, "lr": 1.0},
                             "matrix-factorization": {"n_users": 100, "n_items": 100, "rank": 4,
                                                      "noise": 0.1, "lr": 0.3},
                             "dense-mlp": {**MLP, "lr": 0.05}},
                "batch": 4, "updates": 8000, "snapshots": 32, "rounds": 5, "eval_rows": 1024,
                "eval_batches": 2},
    "tau": {"problem": {"name": "dense-mlp", **MLP}, "workers": 3, "lr": 0.1, "beta": 0.9,
            "batch": 8, "steps": 768, "taus": [1, 4, 16, 64], "snapshots": 24, "eval_rows": 1024,
            "eval_batches": 2},
    "round_robin": {"problem": {"name": "dense-mlp", **MLP}, "lr": 0.1, "rho": 3.0, "batch": 32,
                    "steps": 2000}}
QUICK = {"hogwild": {"updates": 200, "snapshots": 4, "rounds": 1, "eval_rows": 128,
                     "eval_batches": 1},
         "tau": {"steps": 16, "taus": [1, 4], "snapshots": 4, "eval_rows": 128, "eval_batches": 1},
         "round_robin": {"steps": 12}}  # what --quick changes
PARTS = {"hogwild": "hogwild:hogwild_part", "tau": "easgd:tau_part",
         "round_robin": "easgd:round_robin_part"}  # the functions of the jobs
LEVEL = 0.9  # the target loss: this share of the way from the initial to serial SGD's final
TARGET = 1.8  # docs/hogwild.md: Hogwild ×2 over ×1 on a sparse problem


def typical(runs: dict) -> dict:
    """Each contender's median round by seconds (the lower middle one of an even count)."""
    return {key: sorted(rounds, key=lambda r: r["seconds"])[(len(rounds) - 1) // 2]
            for key, rounds in runs.items()}


def target(problem: dict) -> float:
    """The initial held-out loss less LEVEL of serial SGD's drop (its median round)."""
    serial = typical(problem["runs"])["serial"]["curve"]
    return serial[0][2] - LEVEL * (serial[0][2] - serial[-1][2])


def reached(curve: list, level: float) -> float | None:
    """Seconds at the first snapshot at or below ``level``, or None."""
    return next((s for s, _, loss in curve if loss <= level), None)


def paired(base: list[dict], runs: list[dict]) -> float:
    """The median over rounds of the base's run's seconds over the contender's in that round."""
    return statistics.median(a["seconds"] / b["seconds"] for a, b in zip(base, runs))


def hogwild_rows(results: dict, contenders: list[dict], batch: int) -> list[dict]:
    """Per problem and contender, its median round: throughput, speed-ups over Hogwild ×1 and
    the serial loop (paired by round), final loss and the seconds to the target loss."""
    rows = []
    for problem, r in results.items():
        runs, level = typical(r["runs"]), target(r)
        for c in contenders:
            run, seconds = runs[c["key"]], [x["seconds"] for x in r["runs"][c["key"]]]
            rows.append({
                "problem": problem, "contender": c["name"], "key": c["key"],
                "processes": c["processes"], "updates": run["updates"],
                "seconds": run["seconds"], "spread": f"{min(seconds):.2f}–{max(seconds):.2f}",
                "per_rank": " ".join(f"{s:.2f}" for s in run["per_rank_s"]),
                "updates_per_s": run["updates"] / run["seconds"],
                "samples_per_s": run["updates"] * batch / run["seconds"],
                "vs_one": paired(r["runs"]["hogwild1"], r["runs"][c["key"]]),
                "vs_loop": paired(r["runs"]["serial"], r["runs"][c["key"]]),
                "final": run["curve"][-1][2], "level": level,
                "to_level": reached(run["curve"], level)})
    return rows


def verdict(rows: list[dict]) -> dict:
    """Whether Hogwild ×2 reached TARGET× Hogwild ×1 on a sparse problem; the plain loop beside."""
    two = [r for r in rows if r["key"] == "hogwild2" and r["problem"] in SPARSE]
    speedups = {r["problem"]: r["vs_one"] for r in two}
    return {"target": TARGET, "speedups": speedups,
            "over_loop": {r["problem"]: r["vs_loop"] for r in two},
            "met": any(s >= TARGET for s in speedups.values())}


def collision_rows(results: dict) -> list[dict]:
    """Per problem and process count, over the workers: writes, the share colliding,
    coordinates per write and the share of them in colliding rows, overall and per parameter."""
    rows = []
    for problem, r in results.items():
        for p, ranks in r["collisions"].items():
            writes = sum(x["writes"] for x in ranks)
            per = {name: [sum(x["parameters"][name][k] for x in ranks)
                          for k in ("colliding", "coordinates")] for name in ranks[0]["parameters"]}
            coordinates = sum(t[1] for t in per.values())
            rows.append({"problem": problem, "processes": int(p), "writes": writes,
                         "colliding": sum(x["colliding"] for x in ranks) / writes,
                         "coordinates": coordinates / writes,
                         "colliding_coordinates": sum(t[0] for t in per.values()) / coordinates,
                         "by_parameter": {n: t[0] / t[1] for n, t in per.items()},
                         "parameters": " ".join(f"{n} {t[0] / t[1]:.3f}"
                                                for n, t in per.items())})
    return rows


def tau_rows(runs: dict, taus: list[int]) -> list[dict]:
    """Per τ, for EASGD and Downpour: the master's final and peak held-out loss, whether it
    stayed finite and never above the start, the exchanges served; Downpour's final over EASGD's."""
    rows = []
    for tau in taus:
        row = {"tau": tau}
        for method in ("easgd", "downpour"):
            run = runs[f"{method} {tau}"]
            losses = [loss for _, loss in run["curve"]]
            peak = max(x if math.isfinite(x) else math.inf for x in losses[1:])
            row.update({f"{method}_final": losses[-1], f"{method}_peak": peak,
                        f"{method}_stable": math.isfinite(peak) and peak <= losses[0],
                        f"{method}_exchanges": run["exchanges"]})
        rows.append({**row, "ratio": row["downpour_final"] / row["easgd_final"]})
    return rows


def round_robin_rows(runs: list[dict]) -> list[dict]:
    """Per run: steps per second and the master's wall time as shares: pack, wait, update
    (eq. 4), other; busy = pack + update."""
    rows = []
    for r in runs:
        shares = {k: r[k] / r["seconds"] for k in ("pack", "wait", "update")}
        rows.append({"workers": r["workers"], "compute": r["compute"], "ranks": r["workers"] + 1,
                     "steps": r["steps"], "steps_per_s": r["steps"] / r["seconds"],
                     "ms": 1e3 * r["seconds"] / r["steps"],
                     "busy": shares["pack"] + shares["update"], **shares,
                     "other": 1 - sum(shares.values())})
    return rows


def processes(ranks: int) -> list[int]:
    """Hogwild's process counts: 1, 2, 4 … up to ``ranks``, and ``ranks`` itself."""
    counts = [1]
    while counts[-1] * 2 <= ranks:
        counts.append(counts[-1] * 2)
    return counts + ([ranks] if counts[-1] != ranks else [])


def configs(quick: bool, ranks: int) -> tuple[dict, dict]:
    """Each job's config (contenders named, the stand-in calibrated) and the calibration."""
    counts = processes(ranks)
    cfgs = {part: {**c, **(QUICK[part] if quick else {})} for part, c in CONFIGS.items()}
    cfgs["hogwild"].update(collisions=counts[1:], contenders=[
        {"key": "serial", "name": "serial SGD", "processes": 1, "mode": "serial"},
        *({"key": f"{mode}{p}", "name": f"{mode} ×{p}", "processes": p, "mode": mode}
          for mode, ps in (("hogwild", counts), ("locked", counts[1:])) for p in ps)])
    cfgs["round_robin"], calib = calibrated(cfgs["round_robin"], SIZES,
                                            cfgs["round_robin"]["batch"])
    cfgs["round_robin"]["runs"] = [(g, compute) for g in range(1, max(3, ranks - 1) + 1)
                                   for compute in ("real", "stand-in")
                                   if compute == "stand-in" or g + 1 <= ranks]
    return cfgs, calib


def draw(directory: str, parts: dict, rows: dict, cfgs: dict) -> list[str]:
    from . import plot

    out, hogwild = Path(directory), parts["hogwild"]
    names = {c["key"]: c["name"] for c in cfgs["hogwild"]["contenders"]}
    curves = {problem: {names[k]: [(s, loss) for s, _, loss in run["curve"]]
                        for k, run in typical(r["runs"]).items()}
              for problem, r in hogwild.items()}
    return [plot.plot_speedup(rows["hogwild"], rows["collisions"], TARGET,
                              str(out / "async_hogwild_speedup.png")),
            plot.plot_hogwild_loss(curves, {p: r["floor"] for p, r in hogwild.items()},
                                   {p: target(r) for p, r in hogwild.items()},
                                   str(out / "async_hogwild_loss.png")),
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
                 "target": "{level:.4f}", "s to target": "to_level"}))
    speedups, loop = (", ".join(f"{p} {s:.2f}×" for p, s in v[k].items())
                      for k in ("speedups", "over_loop"))
    met = f"{'met' if v['met'] else 'not met'} ({speedups}; over the plain serial loop {loop})"
    print(f"\ntarget (docs/hogwild.md): Hogwild ×2 ≥ {v['target']}× Hogwild ×1 (serial SGD) on "
          f"a sparse problem: {'n/a (double)' if device == 'double' else met}")
    print(table("2. colliding writes of lock-free Hogwild (instrumented, untimed)",
                rows["collisions"],
                {"problem": "problem", "P": "processes", "writes": "writes",
                 "colliding writes": "{colliding:.3f}", "coordinates/write": "coordinates",
                 "colliding coordinates": "{colliding_coordinates:.3f}",
                 "per parameter": "parameters"}))
    cfg, tau = cfgs["tau"], rows["tau"]
    print(table(f"3. asynchronous EASGD against Downpour as the communication period τ grows: "
                f"1 master + {cfg['workers']} workers, {cfg['steps']} steps each", tau,
                {"τ": "tau", "EASGD final": "{easgd_final:.3f}", "EASGD peak": "{easgd_peak:.3f}",
                 "EASGD stable": "easgd_stable", "exchanges": "easgd_exchanges",
                 "Downpour final": "{downpour_final:.3f}",
                 "Downpour peak": "{downpour_peak:.3f}", "Downpour stable": "downpour_stable",
                 "pushes": "downpour_exchanges", "Downpour / EASGD": "ratio"}))
    initial = parts["tau"]["runs"][f"easgd {cfg['taus'][0]}"]["curve"][0][1]
    drift = {m: tau[-1][f"{m}_final"] / tau[0][f"{m}_final"] for m in ("easgd", "downpour")}
    print(f"\nstability: initial held-out loss {initial:.3f}; from τ = {cfg['taus'][0]} to τ = "
          f"{cfg['taus'][-1]} EASGD's final loss changes ×{drift['easgd']:.2f}, Downpour's "
          f"×{drift['downpour']:.2f}")
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
    sizes = {"hogwild": args.ranks, "tau": 1 + cfgs["tau"]["workers"],
             "round_robin": 1 + max(g for g, _ in cfgs["round_robin"]["runs"])}
    parts = {part: job(n, f"scratchpar.bench.asynchronous.{PARTS[part]}", cfgs[part],
                       args.device) for part, n in sizes.items()}
    hogwild = hogwild_rows(parts["hogwild"], cfgs["hogwild"]["contenders"],
                           cfgs["hogwild"]["batch"])
    rows = {"hogwild": hogwild, "verdict": verdict(hogwild),
            "collisions": collision_rows(parts["hogwild"]),
            "tau": tau_rows(parts["tau"]["runs"], cfgs["tau"]["taus"]),
            "round_robin": round_robin_rows(parts["round_robin"])}
    print(f"asynchronous benchmark on {describe(args.device)}, {machine(args)}")
    print(f"stand-in compute (round-robin): MLP {'→'.join(map(str, SIZES))} "
          f"(K = {calib['parameters']:,}) calibrated on the CPU at {calib['rows']} rows: "
          f"{1e6 * calib['per_row_s']:.2f} µs per row")
    print_tables(rows, cfgs, parts, args.device)
    figures = draw_figures(args.figures, draw, parts, rows, cfgs)
    return {"ranks": args.ranks, "config": cfgs, "calibration": calib, **rows, "results": parts,
            "figures": figures}


BENCHMARK = Benchmark("the asynchronous strategies: Hogwild's speed-up and colliding writes, "
                      "EASGD against Downpour as τ grows, the round-robin master",
                      "a few steps of each", measure, lambda parser: parser.add_argument(
                          "--ranks", type=int, default=2, help="the most processes that "
                          "compute at once (default 2, this machine's cores): Hogwild at 1, 2, "
                          "4 … N, round-robin EASGD with real compute up to N ranks (4–8 on a "
                          "bigger machine)"), indent=None,
                      figures="async_hogwild_speedup.png, async_hogwild_loss.png, "
                              "async_easgd_tau.png and async_round_robin_busy.png")
