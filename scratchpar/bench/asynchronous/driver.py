"""The asynchronous benchmark: three parts, each an MPI job, then their rows, target and tables."""

from __future__ import annotations

import math
import statistics

from ...jobs.harness import Benchmark, Ranks, draw_figures, headline, verdict
from ...jobs.mpijob import job
from ...table import table
from ..standin import calibrated, calibration_line
from . import plot
from .hogwild import SPARSE

MLP = {"n_features": 32, "hidden": [64], "n_classes": 10}
SIZES = [MLP["n_features"], *MLP["hidden"], MLP["n_classes"]]  # the MLP's layer widths
HELD_OUT = {"eval_rows": 1024, "eval_batches": 2}  # the held-out rows each copy is judged on
CONFIGS = {
    "hogwild": {"problems": {"sparse-logreg": {"n_features": 512, "nnz": 8, "lr": 1.0},
                             "matrix-factorization": {"n_users": 100, "n_items": 100, "rank": 4,
                                                      "noise": 0.1, "lr": 0.3},
                             "dense-mlp": {**MLP, "lr": 0.05}},
                "batch": 4, "updates": 8000, "snapshots": 32, "rounds": 5, **HELD_OUT},
    "tau": {"problem": {"name": "dense-mlp", **MLP}, "workers": 3, "lr": 0.1, "beta": 0.9,
            "batch": 8, "steps": 768, "taus": [1, 4, 16, 64], "snapshots": 24, **HELD_OUT},
    "round_robin": {"problem": {"name": "dense-mlp", **MLP}, "lr": 0.1, "rho": 3.0, "batch": 32,
                    "steps": 2000, "sizes": SIZES}}
FEWER = {"snapshots": 4, "eval_rows": 128, "eval_batches": 1}  # fewer copies, judged on less
QUICK = {"hogwild": {"updates": 200, "rounds": 1, **FEWER},  # what --quick changes
         "tau": {"steps": 16, "taus": [1, 4], **FEWER}, "round_robin": {"steps": 12}}
PARTS = ("hogwild", "easgd", "easgd")  # the module of each part's job
LEVEL = 0.9  # the target loss: this share of the way from the initial to serial SGD's final
TARGET = 1.8  # docs/hogwild.md: Hogwild ×2 over ×1 on a sparse problem


def typical(runs: dict) -> dict:
    """Each contender's median round by seconds (the lower middle one of an even count)."""
    return {name: sorted(rounds, key=lambda r: r["seconds"])[(len(rounds) - 1) // 2]
            for name, rounds in runs.items()}


def paired(base: list[dict], runs: list[dict]) -> float:
    """The median over rounds of the base's run's seconds over the contender's in that round."""
    return statistics.median(a["seconds"] / b["seconds"] for a, b in zip(base, runs))


def hogwild_rows(results: dict, medians: dict) -> list[dict]:
    """Per problem and contender, its median round (``medians``) and the speed-ups over Hogwild
    ×1 and the serial loop, paired by round; the seconds to the target loss, LEVEL of the way
    from the initial loss to serial SGD's final (None: never)."""
    rows = []
    for problem, r in results.items():
        serial = [loss for _, _, loss in medians[problem]["serial SGD"]["curve"]]
        level = serial[0] - LEVEL * (serial[0] - serial[-1])
        for name, run in medians[problem].items():
            seconds = [x["seconds"] for x in r["runs"][name]]
            rows.append({
                "problem": problem, "contender": name, "P": len(run["per_rank_s"]),
                "run s": run["seconds"], "spread": f"{min(seconds):.2f}–{max(seconds):.2f}",
                "ranks s": " ".join(f"{s:.2f}" for s in run["per_rank_s"]),
                "× 1 proc": paired(r["runs"]["hogwild ×1"], r["runs"][name]),
                "× serial loop": paired(r["runs"]["serial SGD"], r["runs"][name]),
                "final held-out": run["curve"][-1][2], "target": level,
                "s to target": next((s for s, _, loss in run["curve"] if loss <= level), None)})
    return rows


def judged(rows: list[dict]) -> dict:
    """Whether Hogwild ×2 reached TARGET× Hogwild ×1 on a sparse problem; the plain loop beside."""
    two = [r for r in rows if r["contender"] == "hogwild ×2" and r["problem"] in SPARSE]
    speedups = {r["problem"]: r["× 1 proc"] for r in two}
    return {"target": TARGET, "speedups": speedups,
            "over_loop": {r["problem"]: r["× serial loop"] for r in two},
            "met": any(s >= TARGET for s in speedups.values())}


def collision_rows(results: dict) -> list[dict]:
    """Per problem and P, over the workers: writes, the share colliding, coordinates per write
    and the share of them in colliding rows, overall and per parameter."""
    rows = []
    for problem, r in results.items():
        for p, ranks in r["collisions"].items():
            writes = sum(x["writes"] for x in ranks)
            per = {name: [sum(x["parameters"][name][k] for x in ranks)
                          for k in ("colliding", "coordinates")] for name in ranks[0]["parameters"]}
            colliding, coordinates = map(sum, zip(*per.values()))
            shares = " ".join(f"{name} {c / k:.3f}" for name, (c, k) in per.items())
            rows.append({"problem": problem, "P": int(p), "writes": writes,
                         "colliding writes": sum(x["colliding"] for x in ranks) / writes,
                         "coordinates/write": coordinates / writes,
                         "colliding coordinates": colliding / coordinates, "per parameter": shares})
    return rows


def tau_rows(runs: dict, taus: list[int]) -> list[dict]:
    """Per τ, for EASGD and Downpour: the master's final and peak held-out loss, whether it stayed
    finite and never above the start, and the exchanges it served."""
    rows = []
    for tau in taus:
        row = {"τ": tau}
        for method, served in (("EASGD", "exchanges"), ("Downpour", "pushes")):
            run = runs[f"{method} {tau}"]
            losses = [loss for _, _, loss in run["curve"]]
            peak = max(x if math.isfinite(x) else math.inf for x in losses[1:])
            row.update({f"{method} final": losses[-1], f"{method} peak": peak,
                        f"{method} stable": math.isfinite(peak) and peak <= losses[0],
                        f"{method} {served}": run["exchanges"]})
        rows.append(row)
    return rows


def round_robin_rows(runs: list[dict]) -> list[dict]:
    """Per run: steps per second and the master's wall time as shares: busy = pack + update
    (eq. 4), wait, other."""
    rows = []
    for r in runs:
        shares = {k: r[k] / r["seconds"] for k in ("pack", "update", "wait")}
        rows.append({"G": r["workers"], "compute": r["compute"], "steps": r["steps"],
                     "steps/s": r["steps"] / r["seconds"],
                     "busy": shares["pack"] + shares["update"], **shares,
                     "other": 1 - sum(shares.values())})
    return rows


def configs(quick: bool, ranks: list[int]) -> tuple[dict, dict]:
    """Each job's config (contenders named, the stand-in calibrated) and the calibration."""
    cfgs = {part: {**c, **(QUICK[part] if quick else {})} for part, c in CONFIGS.items()}
    cfgs["hogwild"].update(collisions=ranks, contenders=[
        {"name": "serial SGD", "processes": 1, "mode": "serial"},
        *({"name": f"{mode} ×{p}", "processes": p, "mode": mode}
          for mode, ps in (("hogwild", [1, *ranks]), ("locked", ranks)) for p in ps)])
    rr, calib = calibrated(cfgs["round_robin"], SIZES, cfgs["round_robin"]["batch"])
    rr["runs"] = [(g, compute) for g in range(1, max(3, ranks[-1] - 1) + 1)
                  for compute in ("real", "stand-in") if compute == "stand-in" or g < ranks[-1]]
    return {**cfgs, "round_robin": rr}, calib


def measure(args) -> dict:
    cfgs, calib = configs(args.quick, args.ranks)
    sizes = {"hogwild": args.ranks[-1], "tau": 1 + cfgs["tau"]["workers"],
             "round_robin": 1 + max(g for g, _ in cfgs["round_robin"]["runs"])}
    parts = {part: job(n, f"scratchpar.bench.asynchronous.{module}:{part}_part", cfgs[part],
                       args.device) for (part, n), module in zip(sizes.items(), PARTS)}
    medians = {problem: typical(r["runs"]) for problem, r in parts["hogwild"].items()}
    hogwild = hogwild_rows(parts["hogwild"], medians)
    rows = {"hogwild": hogwild, "verdict": judged(hogwild),
            "collisions": collision_rows(parts["hogwild"]),
            "tau": tau_rows(parts["tau"]["runs"], cfgs["tau"]["taus"]),
            "round_robin": round_robin_rows(parts["round_robin"])}
    print(headline("asynchronous benchmark", args))
    print(calibration_line("round-robin", calib))
    cfg, v = cfgs["hogwild"], rows["verdict"]
    rates = ", ".join(f"{p} η = {c['lr']}" for p, c in cfg["problems"].items())
    print(table(f"1. Hogwild against serial SGD: {cfg['updates']} updates of b = {cfg['batch']}, "
                f"{rates}; each contender's median round of {cfg['rounds']}", hogwild,
                formats={"final held-out": ".4f", "target": ".4f"}))
    speedups, loop = (", ".join(f"{p} {s:.2f}×" for p, s in v[k].items())
                      for k in ("speedups", "over_loop"))
    print(f"\ntarget (docs/hogwild.md): Hogwild ×2 ≥ {TARGET}× Hogwild ×1 (serial SGD) on a "
          f"sparse problem: {verdict(args.device, v['met'])} ({speedups}; over the plain serial "
          f"loop {loop})")
    print(table("2. colliding writes of lock-free Hogwild (instrumented, untimed)",
                rows["collisions"], formats=dict.fromkeys(["colliding writes",
                                                           "colliding coordinates"], ".3f")))
    cfg, first, last = cfgs["tau"], rows["tau"][0], rows["tau"][-1]
    print(table(f"3. asynchronous EASGD against Downpour as the communication period τ grows: "
                f"1 master + {cfg['workers']} workers, {cfg['steps']} steps each",
                rows["tau"], formats={k: ".3f" for k in rows["tau"][0]}))
    initial = parts["tau"]["runs"][f"EASGD {first['τ']}"]["curve"][0][2]
    drift = {m: last[f"{m} final"] / first[f"{m} final"] for m in ("EASGD", "Downpour")}
    print(f"\nstability: initial held-out loss {initial:.3f}; from τ = {first['τ']} to τ = "
          f"{last['τ']} EASGD's final loss changes ×{drift['EASGD']:.2f}, Downpour's "
          f"×{drift['Downpour']:.2f}")
    cfg = cfgs["round_robin"]
    print(table(f"4. round-robin EASGD's master as the workers G grow: {cfg['steps']} steps of "
                f"b = {cfg['batch']}; shares of its wall time", rows["round_robin"]))
    figures = draw_figures(args.figures, plot.draw, parts, rows, medians)
    return {"ranks": args.ranks, "config": cfgs, "calibration": calib, **rows, "results": parts,
            "figures": figures}


BENCHMARK = Benchmark("the asynchronous strategies: Hogwild's speed-up and colliding writes, "
                      "EASGD against Downpour as τ grows, the round-robin master",
                      "a few steps of each", measure, indent=None,
                      figures="async_hogwild_speedup.png, async_hogwild_loss.png, "
                              "async_easgd_tau.png and async_round_robin_busy.png",
                      ranks=Ranks((2,), least=2, what="process counts P of Hogwild beside P = 1",
                                  more="round-robin EASGD's real compute up to the most ranks"))
