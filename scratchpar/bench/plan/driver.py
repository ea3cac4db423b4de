"""The planner's validation: per world size, every layout of a run predicted, then measured;
with ``--published``, published runs on thousands of GPUs beside their papers' steps."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import numpy as np

from ...jobs.harness import Benchmark, Ranks, draw_figures, finish, headline, judge
from ...jobs.mpijob import job
from ...plan import published
from ...plan.__main__ import PROFILES, TOP
from ...plan.profile import load
from ...table import table

WORKER = "scratchpar.bench.plan.worker"
CALIBRATE = "scratchpar.plan.calibrate:profile_toml"
RUN = "--model gpt --d-model 64 --n-layers 2 --n-heads 4 --seq-len 64 --batch-size 32".split()
QUICK_RUN = "--model gpt --d-model 16 --n-layers 2 --n-heads 2 --seq-len 16 --batch-size 8".split()
TIMING = {"warmup": 6, "repeats": 10, "rounds": 3}
QUICK_TIMING = {"warmup": 1, "repeats": 3, "rounds": 1}
TARGETS = {"step median": 0.10, "step worst": 0.25, "memory median": 0.05,  # relative errors
           "profile alone median": 0.10, "profile alone worst": 0.25,  # compute by the profile
           "tau": 0.8}  # Kendall's, predicted against measured order; docs/plan.md, Validation
PUBLISHED_TARGETS = {"median": 0.10, "worst": 0.20}  # |error| over the rows not fitted on
FAMILIES = {"dp": "#4c72b0", "dp-naive": "#4c72b0", "local-sgd": "#8172b3", "zero": "#55a868",
            "pipeline": "#dd8452", "hybrid": "#c44e52", "ps": "#937860", "hogwild": "#da8bc3",
            "easgd": "#8c8c8c"}  # each strategy's colour in plan_validation.png


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
    dx, dy = (np.sign(np.subtract.outer(v, v))[np.triu_indices(len(v), 1)] for v in (xs, ys))
    untied = np.abs(dx).sum() * np.abs(dy).sum()
    return float((dx * dy).sum() / np.sqrt(untied)) if untied else float("nan")


def with_errors(rows: list[dict]) -> list[dict]:
    """Each row with its relative errors, predicted / measured − 1, of the step (and of the
    profile alone's) and of memory: None where not measured (a stand-in traces no memory)."""
    def error(row: dict, predicted: str, measured: str) -> float | None:
        return None if row.get(measured) is None else row[predicted] / row[measured] - 1

    return [{**row, "not_run": row.get("not_run"),
             "step_error": error(row, "predicted_s", "measured_s"),
             "profile_error": error(row, "profile_s", "measured_s"),
             "memory_error": error(row, "predicted_bytes", "measured_bytes")} for row in rows]


def scaled(key: str, scale: float, spec: str):
    """A column of each row's ``key`` times ``scale``, formatted by ``spec``; None where missing."""
    return lambda row: None if row.get(key) is None else format(scale * row[key], spec)


COLUMNS = {"N": "ranks", "layout": "layout", "stand-in": "standin",
           "predicted ms": scaled("predicted_s", 1e3, ".2f"),
           "measured ms": scaled("measured_s", 1e3, ".2f"), "step error": "{step_error:+.0%}",
           "profile alone ms": scaled("profile_s", 1e3, ".2f"), "its error": "{profile_error:+.0%}",
           "predicted MiB": scaled("predicted_bytes", 2**-20, ".1f"),
           "measured MiB": scaled("measured_bytes", 2**-20, ".1f"),
           "memory error": "{memory_error:+.0%}", "not run": "not_run"}


def summary(rows: list[dict]) -> dict:
    """The median and worst |relative errors| (memory's over real compute), and Kendall's τ of
    the predicted steps against the measured ones, within each world size and pooled."""
    ran = [r for r in rows if r["step_error"] is not None]
    step, alone, memory = (sorted(abs(r[key]) for r in ran if r[key] is not None)
                           for key in ("step_error", "profile_error", "memory_error"))

    def tau(group: list[dict]) -> float:
        return kendall_tau([r["predicted_s"] for r in group], [r["measured_s"] for r in group])

    return {"layouts": len(ran), "step median": statistics.median(step), "step worst": step[-1],
            "profile alone median": statistics.median(alone), "profile alone worst": alone[-1],
            "memory median": statistics.median(memory) if memory else float("nan"),
            "tau_by_ranks": {n: tau([r for r in ran if r["ranks"] == n])
                             for n in sorted({r["ranks"] for r in ran})}, "tau": tau(ran)}


def verdicts(found: dict, device: str) -> list[dict]:
    """Each target of TARGETS, what was found and its verdict: τ at least its bound, an error
    at most its own."""
    return [{"target": f"{key} {'≥' if key == 'tau' else '≤'} {bound:g}", "measured": found[key],
             "verdict": judge(device, found[key], missing="n/a (not measured)",
                              **{"at_least" if key == "tau" else "at_most": bound})}
            for key, bound in TARGETS.items()]


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
        return {**against_published(args), "plans": timed_plans(args)}
    run, timing = (QUICK_RUN, QUICK_TIMING) if args.quick else (RUN, TIMING)
    if args.rounds is not None:
        if args.rounds < 1:
            raise SystemExit(f"plan: --rounds must be ≥ 1, got {args.rounds}")
        timing = {**timing, "rounds": args.rounds}
    run = [*run, "--device", args.device]  # the layouts train where the benchmark runs
    calibrated = {k: job(k, CALIBRATE, {"device": args.device, "quick": args.quick},
                         args.device) for k in sorted({max(n, 2) for n in args.ranks})}
    profiles = {n: calibrated[max(n, 2)] for n in args.ranks}  # a message needs two ranks
    rows = with_errors([row for n in args.ranks for row in world(
        n, run, profiles[n], timing, args.device, args.quick)])
    print(f"{headline('plan benchmark', args)}; world sizes {args.ranks}; "
          f"run: {' '.join(run)}; beyond {real_ranks(args.device)} ranks, a stand-in computes")
    alone = "all in one process" if args.quick else "each layout in a process of its own"
    print(table(f"predicted beside measured: the step (the slowest rank's median of "
                f"{timing['repeats']}, the least of {timing['rounds']} rounds in turns; {alone}) "
                "and the largest rank's peak traced bytes", rows, COLUMNS))
    found = summary(rows)
    print(table(f"errors over {found['layouts']} layouts; τ within each world size: "
                + ", ".join(f"N={n} {t:.2f}" for n, t in found["tau_by_ranks"].items())
                + "; the target's τ is over all of them", verdicts(found, args.device)))
    return {"run": run, "ranks": args.ranks, "profiles": profiles, "rows": rows,
            "summary": found, "figures": draw_figures(args.figures, draw, rows)}


def against_published(args) -> dict:
    """``--published``: each published run (plan/published.py) predicted from its flags on the
    shipped profiles' kernels, beside its paper's step; its error, predicted / given − 1."""
    rows = []
    for run in published.runs():
        seconds = published.predicted(run, load(PROFILES / f"{run.profile}.toml"))
        rows.append({"source": run.source, "run": run.name, "GPUs": run.gpus,
                     "profile": run.profile, "given": run.given, "step s": run.seconds,
                     "predicted s": seconds, "error": seconds / run.seconds - 1,
                     "fitted": "n½ fitted here" if run.name == published.FITTED else ""})
    constants = "; ".join(
        f"{name}: {k.kind}, η {k.efficiency:g}, n½ {k.half_size:g}, launch {k.launch_s * 1e6:g} µs"
        for name in ("dgx-a100", "dgx-h100") for k in [load(PROFILES / f"{name}.toml").kernels])
    print(table(f"published runs, each predicted from its flags ({constants})", rows,
                formats={"step s": ".2f", "predicted s": ".2f", "error": "+.1%"}))
    found = published.errors(rows, published.FITTED)
    print(table(f"errors over the {found['rows']} rows not fitted on", [
        {"target": f"{key} |error| ≤ {bound:.0%}", "measured": found[key],
         "verdict": judge(args.device, found[key], at_most=bound)}
        for key, bound in PUBLISHED_TARGETS.items()], formats={"measured": ".1%"}))
    return {"rows": rows, "summary": found, "fitted": published.FITTED}


def timed_plans(args, plans=None) -> list[dict]:
    """``--published``, then: the planner's own time on each of ``plans`` (default
    ``published.timed()``), every layout ranked and the top rows shown, as ``python -m
    scratchpar.plan`` ranks and shows them."""
    from ...plan.rank import ranked, show

    rows = []
    for plan in published.timed() if plans is None else plans:
        profile = load(PROFILES / f"{plan.profile}.toml")
        start = time.perf_counter()
        found = ranked(list(plan.flags), plan.world, profile)
        show(found[:TOP], plan.world, profile)
        seconds = time.perf_counter() - start
        rows.append({"run": plan.name, "world": plan.world, "profile": plan.profile,
                     "layouts": len(found), "fit": sum(r.fit.fits for r in found),
                     "seconds": seconds, "target": f"< {plan.seconds:g} s",
                     "verdict": judge(args.device, seconds, at_most=plan.seconds)})
    print(table(f"the planner's own time: every layout ranked, the top {TOP} shown, on one "
                "core", rows, formats={"seconds": ".1f"}))
    return rows


def draw(directory: str, rows: list[dict]) -> list[str]:
    """plan_validation.png: of each layout that ran, step time and peak memory, predicted (y)
    against measured (x), log-log, colour by family and marker by world size (the memory of
    real compute only), with y = x and the ±25% band of the step's target."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from ...trace.figure import pyplot

    rows = [r for r in rows if r["step_error"] is not None]
    fig, axes = pyplot().subplots(1, 2, figsize=(12, 5.4))
    worlds = sorted({r["ranks"] for r in rows})
    for ax, unit, shown, scale, title in zip(axes, ("s", "bytes"), ("ms", "MiB"), (1e3, 2**-20),
                                             ("step time", "peak memory of the largest rank "
                                                           "(traced)")):
        ran = [r for r in rows if r.get(f"measured_{unit}") is not None]  # a stand-in's memory
        if not ran:
            ax.set_title(f"nothing measured: {title}")
            continue
        points = [(scale * r[f"measured_{unit}"], scale * r[f"predicted_{unit}"]) for r in ran]
        for family, color in FAMILIES.items():
            for n, marker in zip(worlds, "os^DvPX*"):  # a marker a world size
                mine = [xy for xy, r in zip(points, ran)
                        if r["strategy"] == family and r["ranks"] == n]
                if mine:
                    ax.scatter(*zip(*mine), color=color, marker=marker, s=28, alpha=0.8,
                               label=f"{family}, N = {n}")
        low, high = min(map(min, points)) / 1.3, max(map(max, points)) * 1.3
        ax.plot([low, high], [low, high], color="black", linewidth=1, label="predicted = measured")
        if unit == "s":
            ax.fill_between([low, high], [0.75 * low, 0.75 * high], [1.25 * low, 1.25 * high],
                            color="grey", alpha=0.15, label="±25%")
        ax.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high), title=title,
               xlabel=f"measured ({shown})", ylabel=f"predicted ({shown})")
        for axis in (ax.xaxis, ax.yaxis):  # 1, 2, 5 a decade, written plainly
            axis.set_major_locator(LogLocator(subs=(1, 2, 5)))
            axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            axis.set_minor_formatter(NullFormatter())
    fig.legend(*axes[0].get_legend_handles_labels(), loc="center right", frameon=False,
               fontsize=7)  # each label once: the step's panel scatters each group once
    fig.suptitle("the planner against this machine: every layout of the run", fontsize=10)
    return [finish(fig, str(Path(directory) / "plan_validation.png"), axes, dpi=130,
                   legend=False, rect=(0, 0, 0.82, 1))]


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
