"""The planner's validation: per world size, every layout of a run predicted, then measured."""

from __future__ import annotations

import os
import statistics

from ...jobs.harness import Benchmark, Ranks, draw_figures, headline, judge
from ...jobs.mpijob import job
from ...table import table
from . import published
from .plot import draw

WORKER = "scratchpar.bench.plan.worker"
CALIBRATE = "scratchpar.plan.calibrate:profile_toml"
RUN = "--model gpt --d-model 64 --n-layers 2 --n-heads 4 --seq-len 64 --batch-size 32".split()
QUICK_RUN = "--model gpt --d-model 16 --n-layers 2 --n-heads 2 --seq-len 16 --batch-size 8".split()
TIMING = {"warmup": 6, "repeats": 10, "rounds": 3}
QUICK_TIMING = {"warmup": 1, "repeats": 3, "rounds": 1}
TARGETS = {"step median": 0.10, "step worst": 0.25, "memory median": 0.05,  # relative errors
           "profile alone median": 0.10, "profile alone worst": 0.25,  # compute by the profile
           "tau": 0.8}  # Kendall's, predicted against measured order; docs/plan.md, Validation
MIB = 2**-20  # MiB a byte


def real_ranks(device: str) -> int:
    """The ranks that compute for real: one per core, and on a GPU one per device."""
    cores = os.cpu_count() or 1
    if device != "cuda":
        return cores
    import cupy

    return min(cores, cupy.cuda.runtime.getDeviceCount())


def kendall_tau(xs: list[float], ys: list[float]) -> float:
    """τ_b (Kendall 1945): (concordant − discordant pairs) / √(pairs untied in x · pairs untied
    in y). Layouts the model prices alike (at one rank, most cost the same) neither agree nor
    disagree with the measured order."""
    n, score, untied_x, untied_y = len(xs), 0, 0, 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = (xs[i] > xs[j]) - (xs[i] < xs[j]), (ys[i] > ys[j]) - (ys[i] < ys[j])
            score, untied_x, untied_y = score + dx * dy, untied_x + abs(dx), untied_y + abs(dy)
    return score / (untied_x * untied_y) ** 0.5 if untied_x and untied_y else float("nan")


def with_errors(rows: list[dict]) -> list[dict]:
    """Each row with its relative errors, predicted / measured − 1, of the step and of memory:
    None where not measured (a stand-in allocates no activations: not traced)."""
    def error(row: dict, unit: str, predicted: str = "predicted") -> float | None:
        measured = row.get(f"measured_{unit}")
        return None if measured is None else row[f"{predicted}_{unit}"] / measured - 1

    return [{**row, "not_run": row.get("not_run"), "step_error": error(row, "s"),
             "profile_error": error(row, "s", "profile"),
             "memory_error": error(row, "bytes")} for row in rows]


def scaled(key: str, scale: float, spec: str):
    """A column of each row's ``key`` times ``scale``, formatted by ``spec``; None where missing."""
    return lambda row: None if row.get(key) is None else format(scale * row[key], spec)


COLUMNS = {"N": "ranks", "layout": "layout", "stand-in": "standin",
           "predicted ms": scaled("predicted_s", 1e3, ".2f"),
           "measured ms": scaled("measured_s", 1e3, ".2f"), "step error": "{step_error:+.0%}",
           "profile alone ms": scaled("profile_s", 1e3, ".2f"),
           "its error": "{profile_error:+.0%}",
           "predicted MiB": scaled("predicted_bytes", MIB, ".1f"),
           "measured MiB": scaled("measured_bytes", MIB, ".1f"),
           "memory error": "{memory_error:+.0%}", "not run": "not_run"}


def tau(rows: list[dict]) -> float:
    """Kendall's τ of ``rows``' predicted steps against their measured ones."""
    return kendall_tau([r["predicted_s"] for r in rows], [r["measured_s"] for r in rows])


def summary(rows: list[dict]) -> dict:
    """The median and worst relative errors (memory's over real compute), and τ within each
    world size and pooled."""
    ran = [r for r in rows if r["step_error"] is not None]
    step = sorted(abs(r["step_error"]) for r in ran)
    alone = sorted(abs(r["profile_error"]) for r in ran)
    memory = sorted(abs(r["memory_error"]) for r in ran if r["memory_error"] is not None)
    return {"layouts": len(ran), "step median": statistics.median(step), "step worst": step[-1],
            "profile alone median": statistics.median(alone), "profile alone worst": alone[-1],
            "memory median": statistics.median(memory) if memory else float("nan"),
            "tau_by_ranks": {n: tau([r for r in ran if r["ranks"] == n])
                             for n in sorted({r["ranks"] for r in ran})}, "tau": tau(ran)}


def verdicts(found: dict, device: str) -> list[dict]:
    """Each target of TARGETS, what was found and its verdict: τ at least its bound, an error
    at most its own."""
    rows = []
    for key, bound in TARGETS.items():
        goal = {"at_least": bound} if key == "tau" else {"at_most": bound}
        rows.append({"target": f"{key} {'≥' if key == 'tau' else '≤'} {bound:g}",
                     "measured": found[key],
                     "verdict": judge(device, found[key], **goal, missing="n/a (not measured)")})
    return rows


def world(n: int, run: list[str], profile: str, timing: dict, device: str,
          together: bool) -> list[dict]:
    """Every layout of ``run`` on ``n`` ranks (beyond :func:`real_ranks`, those a stand-in
    computes for), predicted in one job, then measured each round in a job of its own (or
    ``together`` in one), taking turns: its step is the least of its rounds (docs/plan.md)."""
    standin = n > real_ranks(device)
    rows = job(n, f"{WORKER}:predicted", {"run": run, "profile": profile, "standin": standin,
                                          **timing}, device)
    groups = [rows] if together else [[row] for row in rows]
    for k in range(timing["rounds"]):
        for group in groups:
            seconds = [row["seconds"] for row in group] if standin else None
            found = job(n, f"{WORKER}:runs", {"run": run, "flags": [r["flags"] for r in group],
                                              "seconds": seconds, "traced": k == 0,
                                              **timing}, device)
            for row, got in zip(group, found):
                row.setdefault("rounds_s", []).extend(got.pop("rounds_s", []))
                row.update(got)
    for row in rows:
        if row.get("rounds_s"):
            row["measured_s"] = min(row["rounds_s"])
    return rows


def measure(args) -> dict:
    if args.published:
        return published.measure(args)
    run, timing = (QUICK_RUN, QUICK_TIMING) if args.quick else (RUN, TIMING)
    if args.rounds is not None:
        if args.rounds < 1:
            raise SystemExit(f"plan: --rounds must be ≥ 1, got {args.rounds}")
        timing = {**timing, "rounds": args.rounds}
    run = [*run, "--device", args.device]  # the layouts train where the benchmark runs
    ranks = args.ranks
    calibrated = {k: job(k, CALIBRATE, {"device": args.device, "quick": args.quick},
                         args.device) for k in sorted({max(n, 2) for n in ranks})}
    profiles = {n: calibrated[max(n, 2)] for n in ranks}  # a message needs two ranks
    rows = with_errors([row for n in ranks for row in world(n, run, profiles[n], timing,
                                                             args.device, args.quick)])
    print(f"{headline('plan benchmark', args)}; world sizes {ranks}; "
          f"run: {' '.join(run)}; beyond {real_ranks(args.device)} ranks, a stand-in computes")
    alone = "all in one process" if args.quick else "each layout in a process of its own"
    print(table(f"predicted beside measured: the step (the slowest rank's median of "
                f"{timing['repeats']}, the least of {timing['rounds']} rounds in turns; {alone}) "
                "and the largest rank's peak traced bytes", rows, COLUMNS))
    found = summary(rows)
    print(table(f"errors over {found['layouts']} layouts; τ within each world size: "
                + ", ".join(f"N={n} {t:.2f}" for n, t in found["tau_by_ranks"].items())
                + "; the target's τ is over all of them", verdicts(found, args.device)))
    figures = draw_figures(args.figures, draw, rows)
    return {"run": run, "ranks": ranks, "profiles": profiles, "rows": rows, "summary": found,
            "figures": figures}


def arguments(parser) -> None:
    parser.add_argument("--rounds", type=int, help="timing rounds per layout, each a job "
                        f"(default {TIMING['rounds']}; fewer on a device lent by the minute)")
    parser.add_argument("--published", action="store_true", help="instead, predict published "
                        "runs on thousands of GPUs and set them beside their papers' steps")


BENCHMARK = Benchmark("the planner against real runs: every layout runnable here, its step "
                      "and memory predicted beside measured, errors and Kendall's tau",
                      "a tiny GPT, a few steps", measure, arguments,
                      figures="plan_validation.png",
                      ranks=Ranks((1, 2, 3, 4), (1, 2, 3), more="one job each"))
