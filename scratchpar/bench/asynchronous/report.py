"""The asynchronous benchmark's rows and its target, from the jobs' results."""

from __future__ import annotations

import math
import statistics

from .problems import SPARSE

LEVEL = 0.9  # the target loss: this share of the way from the initial to serial SGD's final
TARGET = 1.8  # docs/hogwild.md: Hogwild ×2 over ×1 on a sparse problem


def contender_name(c: dict) -> str:
    return "serial SGD" if c["mode"] == "serial" else f"{c['mode']} ×{c['processes']}"


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


def paired(base: list[dict], runs: list[dict], measure) -> float | None:
    """The median over rounds of ``measure(base's run) / measure(the contender's run)`` in the
    same round (None if a measure is missing in every round)."""
    ratios = [measure(a) / measure(b) for a, b in zip(base, runs) if measure(a) and measure(b)]
    return statistics.median(ratios) if ratios else None


def hogwild_rows(results: dict, contenders: list[dict], batch: int) -> list[dict]:
    """Per problem and contender, its median round: throughput, speed-ups over Hogwild ×1 and
    the serial loop (paired by round), final loss and the seconds to the target loss."""
    rows = []
    for problem, r in results.items():
        runs, level = typical(r["runs"]), target(r)
        loop, one = r["runs"]["serial"], r["runs"]["hogwild1"]

        def to_level(run, level=level):
            return reached(run["curve"], level)

        for c in contenders:
            run, rounds = runs[c["key"]], r["runs"][c["key"]]
            seconds = [x["seconds"] for x in rounds]
            rows.append({
                "problem": problem, "contender": contender_name(c), "key": c["key"],
                "processes": c["processes"], "updates": run["updates"],
                "seconds": run["seconds"], "spread": f"{min(seconds):.2f}–{max(seconds):.2f}",
                "per_rank": " ".join(f"{s:.2f}" for s in run["per_rank_s"]),
                "updates_per_s": run["updates"] / run["seconds"],
                "samples_per_s": run["updates"] * batch / run["seconds"],
                "vs_one": paired(one, rounds, lambda x: x["seconds"]),
                "vs_loop": paired(loop, rounds, lambda x: x["seconds"]),
                "final": run["curve"][-1][2], "level": level, "to_level": to_level(run),
                "level_vs_one": paired(one, rounds, to_level)})
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
            per = {}
            for x in ranks:
                for name, c in x["parameters"].items():
                    total = per.setdefault(name, [0, 0])
                    total[0] += c["colliding"]
                    total[1] += c["coordinates"]
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
                        f"{method}_exchanges": run["exchanges"],
                        f"{method}_seconds": run["seconds"]})
        row["ratio"] = row["downpour_final"] / row["easgd_final"]
        rows.append(row)
    return rows


def drift(rows: list[dict], method: str) -> float:
    """A method's final loss at the largest τ over its final at the smallest."""
    return rows[-1][f"{method}_final"] / rows[0][f"{method}_final"]


def round_robin_rows(runs: list[dict]) -> list[dict]:
    """Per run: steps per second and the master's wall time as shares: pack, wait, update
    (eq. 4), other; busy = pack + update."""
    rows = []
    for r in runs:
        seconds = r["seconds"]
        shares = {k: r[k] / seconds for k in ("pack", "wait", "update")}
        rows.append({"workers": r["workers"], "compute": r["compute"],
                     "ranks": r["workers"] + 1, "steps": r["steps"],
                     "steps_per_s": r["steps"] / seconds, "ms": 1e3 * seconds / r["steps"],
                     "busy": shares["pack"] + shares["update"], **shares,
                     "other": 1 - sum(shares.values())})
    return rows
