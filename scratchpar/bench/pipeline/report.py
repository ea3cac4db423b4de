"""The pipeline benchmark's rows: measured bubbles and stashes beside the formulas."""

from __future__ import annotations

import statistics

from ...parallel.pipeline import schedules, simulate
from ...parallel.pipeline.simulator import bubble_formula

RATIO_TARGET = 1.1  # docs/pipeline.md: measured bubble / formula at m ≥ 4p; interleaved / v


def schedule_for(name: str, p: int, m: int, v: int, forward: float, backward: float):
    """Schedule ``name``; those placed by costs (interleaved, bprio) get the calibrated ones."""
    if name == "interleaved":
        return schedules.interleaved(p, m, v, forward, backward)
    if name == "bprio":
        return schedules.bprio(p, m, forward, backward)
    return schedules.build(name, p, m, v)


def summarize(runs: list[dict], calib: dict) -> list[dict]:
    """Each run with its median bubble and idle time (bubble × window: idle ms per rank), the
    simulator's ideal bubble and peak stash for the calibrated costs, and the formula."""
    f, b = calib["forward_s"], calib["backward_s"]
    for run in runs:
        p, m, v = run["p"], run["m"], run["v"]
        ideal = simulate(schedule_for(run["schedule"], p, m, v, f, b), f, b)
        # GPipe (Huang et al. 2019, §2.3): (p−1)/(m+p−1), 1F1B's alike (Narayanan et al. 2021,
        # §2.1); interleaved (Narayanan et al. 2021, §2.2): (p−1)/(v·m+p−1)
        formula = bubble_formula(p, m, v)
        run.update(bubble=statistics.median(run["bubbles"]),
                   idle_s=statistics.median(x * w for x, w in zip(run["bubbles"],
                                                                  run["windows_s"])),
                   window_s=statistics.median(run["windows_s"]), simulated=ideal.bubble,
                   ideal_idle_s=ideal.bubble * ideal.makespan,
                   simulated_peak=[ideal.peak_stash[s] for s in range(p)],
                   formula=formula)
        run["extra_ms"] = 1e3 * (run["idle_s"] - run["ideal_idle_s"]) / m  # per micro-batch
    return runs


def bubble_rows(runs: list[dict]) -> list[dict]:
    """GPipe and 1F1B over m; the target applies once m ≥ 4p."""
    rows = []
    for r in runs:
        if r["schedule"] in ("gpipe", "1f1b"):
            ratio = r["bubble"] / r["formula"]
            rows.append({"schedule": r["schedule"], "p": r["p"], "m": r["m"],
                         "bubble": r["bubble"], "simulated": r["simulated"],
                         "formula": r["formula"], "ratio": ratio, "extra_ms": r["extra_ms"],
                         "ok": ratio <= RATIO_TARGET if r["m"] >= 4 * r["p"] else None})
    return rows


def find(runs: list[dict], schedule: str, p: int, m: int, v: int = 1) -> dict:
    return next(r for r in runs if (r["schedule"], r["p"], r["m"], r["v"]) == (schedule, p, m, v))


def interleaved_rows(runs: list[dict]) -> list[dict]:
    """Interleaved against 1F1B at the same p and m: idle time per rank, whose ideal ratio is
    1/v (Narayanan et al. 2021, §2.2: the bubble time (p−1)(t_f+t_b)/v)."""
    rows = []
    for r in runs:
        if r["schedule"] == "interleaved":
            base = find(runs, "1f1b", r["p"], r["m"])
            ratio = r["idle_s"] / base["idle_s"]
            rows.append({"p": r["p"], "m": r["m"], "v": r["v"], "bubble": r["bubble"],
                         "simulated": r["simulated"], "formula": r["formula"],
                         "1f1b_bubble": base["bubble"], "idle_ms": 1e3 * r["idle_s"],
                         "1f1b_idle_ms": 1e3 * base["idle_s"], "idle_ratio": ratio,
                         "target": RATIO_TARGET / r["v"], "extra_ms": r["extra_ms"],
                         "ok": ratio <= RATIO_TARGET / r["v"]})
    return rows


def memory_rows(runs: list[dict], m: int) -> list[dict]:
    """Peak micro-batches and boundary-activation bytes per stage at the largest m, 1F1B beside
    GPipe: 1F1B holds at most p − s on stage s (Narayanan et al. 2021, §2.1), GPipe all m."""
    rows = []
    for p in sorted({r["p"] for r in runs}):
        gpipe, ofob = find(runs, "gpipe", p, m), find(runs, "1f1b", p, m)
        for s in range(p):
            rows.append({"p": p, "m": m, "stage": s, "gpipe_peak": gpipe["peak"][s],
                         "gpipe_bytes": gpipe["peak_bytes"][s], "1f1b_peak": ofob["peak"][s],
                         "1f1b_bytes": ofob["peak_bytes"][s],
                         "1f1b_simulated": ofob["simulated_peak"][s], "bound": p - s,
                         "ok": ofob["peak"][s] <= p - s and gpipe["peak"][s] == m})
    return rows


def real_rows(timed: dict, cfg: dict) -> list[dict]:
    """Tokens per second of each contender, and its ratio to one device on the whole batch and
    on the m micro-batches (which on a CPU alone runs faster per token)."""
    tokens, one = cfg["batch"] * cfg["seq"], timed["alone"]["median_s"]
    micro = timed["alone-micro"]["median_s"]
    return [{"contender": name, "ranks": 1 if name.startswith("alone") else 2,
             "m": cfg["m"] if name in ("alone-micro", "gpipe", "1f1b") else 1,
             "ms": 1e3 * t["median_s"],
             "tokens_per_s": tokens / t["median_s"], "vs_one_device": one / t["median_s"],
             "vs_micro": micro / t["median_s"]}
            for name, t in timed.items()]


def memory_real_rows(timed: dict) -> list[dict]:
    """Per rank of each GPT pipeline: the parameter bytes it holds against the whole model's
    (model distribution's saving), and its peak micro-batches and boundary-activation bytes."""
    return [{"contender": name, "rank": r, "param_bytes": rank["param_bytes"],
             "model_bytes": t["memory"]["model_bytes"],
             "share": rank["param_bytes"] / t["memory"]["model_bytes"], "peak": rank["peak"],
             "peak_bytes": rank["peak_bytes"]}
            for name, t in timed.items() if "memory" in t
            for r, rank in enumerate(t["memory"]["per_rank"])]
