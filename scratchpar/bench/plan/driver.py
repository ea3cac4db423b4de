"""The planner's validation: this machine calibrated at each world size, as for a run of that
many ranks; then per world size, one job that predicts every layout the training command accepts
there, and one job per layout and round that measures it as the command runs it (``--quick``:
one job for them all). Beyond :func:`real_ranks` the model's compute is a stand-in's sleep of
its measured time (``bench/standin.py``), for the layouts that run the whole model through its
loss."""

from __future__ import annotations

import math
import os
import statistics

from ...jobs.harness import Benchmark, describe, draw_figures, ints, machine, verdict
from ...jobs.mpijob import job
from ...table import table
from .plot import draw

WORKER = "scratchpar.bench.plan.worker"
CALIBRATE = "scratchpar.plan.calibrate:profile_toml"
RUN = ["--model", "gpt", "--d-model", "64", "--n-layers", "2", "--n-heads", "4",
       "--seq-len", "64", "--batch-size", "32"]
QUICK_RUN = ["--model", "gpt", "--d-model", "16", "--n-layers", "2", "--n-heads", "2",
             "--seq-len", "16", "--batch-size", "8"]
TIMING = {"warmup": 6, "repeats": 10, "rounds": 3}
QUICK_TIMING = {"warmup": 1, "repeats": 3, "rounds": 1}
TARGETS = {"step median": 0.10, "step worst": 0.25, "memory median": 0.05,  # relative errors
           "tau": 0.8}  # Kendall's, predicted against measured order; docs/plan.md, Validation
COLUMNS = {"N": "ranks", "layout": "layout", "= 1 device": "exact", "stand-in": "standin",
           "predicted ms": "{predicted_ms:.2f}", "measured ms": "{measured_ms:.2f}",
           "step error": "{step_error:+.0%}", "predicted MiB": "{predicted_mib:.1f}",
           "measured MiB": "{measured_mib:.1f}", "memory error": "{memory_error:+.0%}",
           "not run": "not_run"}


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
    """Each row with its figures in ms and MiB and its relative errors (predicted / measured
    − 1), None where it did not run (memory: a stand-in allocates no activations, not traced)."""
    return [{**row, "not_run": row.get("not_run"), **error(row, "s", "ms", 1e3, "step"),
             **error(row, "bytes", "mib", 2**-20, "memory")} for row in rows]


def error(row: dict, unit: str, shown: str, scale: float, what: str) -> dict:
    """``row``'s predicted and measured ``unit`` times ``scale``, as ``shown``, and the error."""
    keys = (f"predicted_{shown}", f"measured_{shown}", f"{what}_error")
    if f"measured_{unit}" not in row:
        return dict.fromkeys(keys)
    predicted, measured = row[f"predicted_{unit}"], row[f"measured_{unit}"]
    return dict(zip(keys, (scale * predicted, scale * measured, predicted / measured - 1)))


def summary(rows: list[dict]) -> dict:
    """The median and worst relative errors (memory's over real compute), and τ within each
    world size and pooled."""
    ran = [r for r in rows if r["step_error"] is not None]
    step = sorted(abs(r["step_error"]) for r in ran)
    memory = sorted(abs(r["memory_error"]) for r in ran if r["memory_error"] is not None)
    taus = {n: kendall_tau([r["predicted_s"] for r in ran if r["ranks"] == n],
                           [r["measured_s"] for r in ran if r["ranks"] == n])
            for n in sorted({r["ranks"] for r in ran})}
    return {"layouts": len(ran), "step median": statistics.median(step), "step worst": step[-1],
            "memory median": statistics.median(memory) if memory else float("nan"),
            "tau_by_ranks": taus,
            "tau": kendall_tau([r["predicted_s"] for r in ran], [r["measured_s"] for r in ran])}


def verdicts(found: dict, device: str) -> list[dict]:
    rows = []
    for key, bound in TARGETS.items():
        ok = found[key] >= bound if key == "tau" else found[key] <= bound
        rows.append({"target": f"{key} {'≥' if key == 'tau' else '≤'} {bound:g}",
                     "measured": found[key], "verdict": verdict(
                         device, None if math.isnan(found[key]) else ok, "n/a (not measured)")})
    return rows


def world(n: int, run: list[str], profile: str, timing: dict, device: str,
          together: bool) -> list[dict]:
    """Every layout of ``run`` on ``n`` ranks (beyond :func:`real_ranks`, those a stand-in
    computes for), predicted in one job, then measured: each in a job of its own (the training
    command's conditions), or ``together`` in one. Each round is a job of its own, the layouts
    taking turns, and a layout's step is the least of its rounds: one layout's steps differed by
    15% from one fresh job to the next here, and a burst of load spoils a round, not a figure."""
    standin = n > real_ranks(device)
    rows = job(n, f"{WORKER}:predicted", {"run": run, "profile": profile, "standin": standin,
                                          **timing}, device)
    groups = [rows] if together else [[row] for row in rows]
    for k in range(timing["rounds"]):
        for group in groups:
            seconds = [row["seconds"] for row in group] if standin else None
            found = job(n, f"{WORKER}:runs", {"run": run, "flags": [r["flags"] for r in group],
                                              "seconds": seconds, "traced": k == 0,
                                              **timing, "rounds": 1}, device)
            for row, got in zip(group, found):
                row.setdefault("rounds_s", []).extend(got.pop("rounds_s", []))
                row.update(got)
    for row in rows:
        if row.get("rounds_s"):
            row["measured_s"] = min(row["rounds_s"])
    return rows


def measure(args) -> dict:
    run, timing = (QUICK_RUN, QUICK_TIMING) if args.quick else (RUN, TIMING)
    if args.rounds is not None:
        if args.rounds < 1:
            raise SystemExit(f"plan: --rounds must be ≥ 1, got {args.rounds}")
        timing = {**timing, "rounds": args.rounds}
    run = [*run, "--device", args.device]  # the layouts train where the benchmark runs
    ranks = sorted(set(args.ranks or ([1, 2, 3] if args.quick else [1, 2, 3, 4])))
    if ranks[0] < 1:
        raise SystemExit(f"plan: every world size must be ≥ 1, got {ranks}")
    calibrated = {k: job(k, CALIBRATE, {"device": args.device, "quick": args.quick},
                         args.device) for k in sorted({max(n, 2) for n in ranks})}
    profiles = {n: calibrated[max(n, 2)] for n in ranks}  # a message needs two ranks
    rows = with_errors([row for n in ranks for row in world(n, run, profiles[n], timing,
                                                             args.device, args.quick)])
    print(f"plan benchmark on {describe(args.device)}, {machine(args)}; world sizes {ranks}")
    print(f"run: {' '.join(run)}; the profile calibrated here at each world size (1 rank: 2's), "
          f"compute timed here, and beyond {real_ranks(args.device)} ranks slept for its time "
          "by a stand-in")
    alone = "all in one process" if args.quick else "each layout in a process of its own"
    print(table(f"predicted beside measured: the step (the slowest rank's median of "
                f"{timing['repeats']}, the least of {timing['rounds']} rounds in turns; {alone}) "
                "and the largest rank's peak traced bytes", rows, COLUMNS))
    found = summary(rows)
    print(table(f"errors over {found['layouts']} layouts; τ within each world size: "
                + ", ".join(f"N={n} {t:.2f}" for n, t in found["tau_by_ranks"].items())
                + "; the target's τ is over all of them", verdicts(found, args.device),
                {"target": "target", "measured": "{measured:.2f}", "verdict": "verdict"}))
    figures = draw_figures(args.figures, draw, rows)
    return {"run": run, "ranks": ranks, "profiles": profiles, "rows": rows, "summary": found,
            "figures": figures}


def arguments(parser) -> None:
    parser.add_argument("--ranks", type=ints, help="comma-separated world sizes, one job each "
                        "(default 1,2,3,4)")
    parser.add_argument("--rounds", type=int, help="timing rounds per layout, each a job "
                        f"(default {TIMING['rounds']}; fewer on a device lent by the minute)")


BENCHMARK = Benchmark("the planner against real runs: every layout runnable here, its step "
                      "and memory predicted beside measured, errors and Kendall's tau",
                      "a tiny GPT, a few steps", measure, arguments,
                      figures="plan_validation.png")

