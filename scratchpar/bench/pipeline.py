"""Measure pipeline bubbles, stashed activations and throughput against formulas and one device."""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
from pathlib import Path

from ..parallel.pipeline import schedules, simulate
from ..parallel.pipeline.simulator import bubble_formula
from .device import add_argument as add_device_argument
from .device import describe
from .mpijob import JobFailed, per_world_size, run_module
from .sleep_stage import calibrate
from .table import table

GPT = {"vocab": 64, "seq": 64, "d_model": 128, "heads": 4, "layers": 4, "batch": 64, "m": 8,
       "warmup": 2, "repeats": 8}  # the real model; its p = 2 stages calibrate the sleeps
QUICK_GPT = {"vocab": 32, "seq": 16, "d_model": 32, "heads": 2, "layers": 2, "batch": 8, "m": 4,
             "warmup": 1, "repeats": 2}
FULL = {"ps": [2, 4, 8], "ms": [1, 2, 4, 8, 16, 32], "vs": [2, 4], "per_p": [1, 4],
        "warmup": 1, "steps": 4}  # interleaved at m = per_p · p
QUICK = {"ps": [2, 4], "ms": [1, 4, 8], "vs": [2], "per_p": [2], "warmup": 1, "steps": 2}
ROWS = 8  # rows of a sleep-stage micro-batch
COMPARED = {"p": 4, "m": 8, "v": 2,
            "names": ["gpipe", "1f1b", "interleaved", "naive", "bprio", "pipedream"]}
RATIO_TARGET = 1.1  # measured bubble ≤ 1.1 × formula once m ≥ 4p; interleaved idle ≤ 1.1 / v
JOB_TIMEOUT_S = 600


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="p = 2, 4, three m, a tiny GPT (smoke test, well under a minute)")
    parser.add_argument("--json", metavar="PATH", help="also write every number to this file")
    parser.add_argument("--figures", metavar="DIR",
                        help="write pipeline_bubble.png, a Gantt timeline per schedule and "
                             "the Chrome traces they come from here")
    add_device_argument(parser)


def schedule_for(name: str, p: int, m: int, v: int, forward: float, backward: float):
    """Schedule ``name``; those placed by costs (interleaved, bprio) get the calibrated ones."""
    if name == "interleaved":
        return schedules.interleaved(p, m, v, forward, backward)
    if name == "bprio":
        return schedules.bprio(p, m, forward, backward)
    return schedules.build(name, p, m, v)


def runs_for(p: int, sizes: dict, figures: bool) -> list[dict]:
    """The schedules run at p stages: GPipe and 1F1B over m, interleaved at m = per_p·p, and at
    the compared p every schedule at the compared m (traced when figures are asked for)."""
    keys = [(s, m, 1) for s in ("gpipe", "1f1b") for m in sizes["ms"]]
    keys += [(s, k * p, v) for k in sizes["per_p"] for v in (1, *sizes["vs"])
             for s in (("1f1b",) if v == 1 else ("interleaved",))]
    compared = []
    if p == COMPARED["p"]:
        compared = [(s, 1 if s == "naive" else COMPARED["m"], COMPARED["v"] if
                     s == "interleaved" else 1) for s in COMPARED["names"]]
    return [{"schedule": s, "m": m, "v": v, "compared": (s, m, v) in compared,
             "trace": figures and (s, m, v) in compared}
            for s, m, v in dict.fromkeys(keys + compared)]


def job(p: int, args: list[str], tmp: Path, device: str = "cpu") -> dict:
    out = tmp / f"pipeline-n{p}.json"
    run_module(p, "scratchpar.bench.pipeline_worker", [*args, "--out", str(out),
                                                       "--device", device], JOB_TIMEOUT_S, {})
    return json.loads(out.read_text())


def sleep_jobs(sizes: dict, calib: dict, figures: str | None) -> tuple[list[dict], tuple]:
    """Every run at each p, one job per p; and the load average before and after."""
    def measure(p: int, tmp: Path) -> list[dict]:
        print(f"pipeline: sleep stages, p={p}", file=sys.stderr, flush=True)
        spec = {"forward_s": calib["forward_s"], "backward_s": calib["backward_s"],
                "rows": ROWS, "warmup": sizes["warmup"], "steps": sizes["steps"],
                "runs": runs_for(p, sizes, figures is not None)}
        return job(p, ["--sleep", json.dumps(spec)] + (["--traces", figures] if figures else []),
                   tmp)["sleep"]

    results, load = per_world_size(sizes["ps"], measure)
    return [run for p in sizes["ps"] for run in results[p]], load


def real_job(cfg: dict, device: str) -> tuple[dict, tuple]:
    print("pipeline: GPT on 2 ranks", file=sys.stderr, flush=True)
    results, load = per_world_size([2], lambda p, tmp: job(p, ["--real", json.dumps(cfg)], tmp,
                                                           device)["real"])
    return results[2], load


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


def draw(directory: str, bubbles: list[dict], runs: list[dict], calib: dict) -> list[str]:
    """The bubble curve and, for each traced schedule, its simulated and measured timelines."""
    from ..trace.pipeline_plot import measured_spans, plot_bubble_curve, plot_pipeline_timeline

    paths = [plot_bubble_curve(bubbles, str(Path(directory) / "pipeline_bubble.png"))]
    f, b = 1e3 * calib["forward_s"], 1e3 * calib["backward_s"]  # ms, as the measured spans
    for r in runs:
        if r["trace"]:
            ideal = simulate(schedule_for(r["schedule"], r["p"], r["m"], r["v"], f, b), f, b)
            paths.append(plot_pipeline_timeline(
                ideal, r["trace"].replace(".trace.json", ".png"), measured_spans(r["trace"]),
                title=f"{r['schedule']}: p={r['p']}, m={r['m']}, v={r['v']}, sleep stages "
                      f"(F {f:.1f} ms, B {b:.1f} ms per stage)"))
    return paths


def run(args) -> int:
    sizes, cfg = (QUICK, QUICK_GPT) if args.quick else (FULL, GPT)
    calib = calibrate(GPT)
    print(f"pipeline benchmark: sleep stages on the host, the GPT on {describe(args.device)}; "
          f"{os.cpu_count()} cores; ranks waiting on a message poll (yield, then nap ≤ 1 ms), "
          "so sleeping ranks beyond the cores cost nothing")
    print(f"calibration: GPT (d_model {GPT['d_model']}, {GPT['heads']} heads, {GPT['layers']} "
          f"blocks, T {GPT['seq']}, float32, CPU) cut in 2 stages by parameters, micro-batch "
          f"{calib['rows']} sequences: " + "; ".join(
              f"stage {s} (layers {st['layers'][0]}–{st['layers'][1] - 1}) forward "
              f"{1e3 * st['forward_s']:.2f} ms, backward {1e3 * st['backward_s']:.2f} ms"
              for s, st in enumerate(calib["stages"]))
          + f" → each sleep stage sleeps {1e3 * calib['forward_s']:.2f} ms forward, "
          f"{1e3 * calib['backward_s']:.2f} ms backward per micro-batch ({ROWS} rows)")
    if args.figures and importlib.util.find_spec("matplotlib") is None:
        print("figures: matplotlib missing (pip install 'scratchpar[plot]'); traces only")
    try:
        runs, load = sleep_jobs(sizes, calib, args.figures)
        timed, (_, after) = real_job(cfg, args.device)
    except JobFailed as failure:
        print(f"pipeline: {failure}", file=sys.stderr)
        return 1
    runs = summarize(runs, calib)
    bubbles, inter = bubble_rows(runs), interleaved_rows(runs)
    memory, real = memory_rows(runs, max(sizes["ms"])), real_rows(timed, cfg)
    compared = [r for r in runs if r["compared"]]
    print(f"load average (1 min) before: {load[0]:.2f}, after: {after:.2f}; median of "
          f"{sizes['steps']} steps after {sizes['warmup']} warm-up; bubble = 1 − Σ busy / "
          "(p · window), window = first F's start to last B's end, busy = F and B regions")
    print(table("bubble, sleep stages: measured against the simulator and (p−1)/(m+p−1); "
                f"target measured/formula ≤ {RATIO_TARGET} at m ≥ 4p", bubbles,
                {"schedule": "schedule", "p": "p", "m": "m", "measured": "bubble",
                 "simulated": "simulated", "formula": "formula", "measured/formula": "ratio",
                 "≤1.1×": "ok", "idle beyond ideal, ms/micro-batch": "extra_ms"}))
    print(table("interleaved against 1F1B at the same p, m: idle ms per rank per step, target "
                "ratio ≤ 1.1/v", inter,
                {"p": "p", "m": "m", "v": "v", "measured": "bubble", "simulated": "simulated",
                 "formula": "formula", "1f1b": "1f1b_bubble", "idle ms": "idle_ms",
                 "1f1b idle ms": "1f1b_idle_ms", "ratio": "idle_ratio", "target": "target",
                 "met": "ok", "beyond ideal, ms/mb": "extra_ms"}))
    print(table("peak stashed activations per stage (runtime.peak micro-batches, peak_bytes of "
                "boundary activations); bounds: 1F1B ≤ p − s, GPipe = m", memory,
                {"p": "p", "m": "m", "stage": "stage", "gpipe mb": "gpipe_peak",
                 "gpipe B": "gpipe_bytes", "1f1b mb": "1f1b_peak", "1f1b B": "1f1b_bytes",
                 "simulated": "1f1b_simulated", "p−s": "bound", "met": "ok"}))
    if compared:
        print(table(f"every schedule at p={COMPARED['p']}, sleep stages (naive: m=1; "
                    "pipedream's per-micro-batch STEPs count as idle)", compared,
                    {"schedule": "schedule", "m": "m", "v": "v", "measured": "bubble",
                     "simulated": "simulated", "formula": "formula"}))
    print(table(f"GPT (d_model {cfg['d_model']}, {cfg['layers']} blocks, T {cfg['seq']}, "
                f"batch {cfg['batch']}, float32) on {describe(args.device)}: alone = one device "
                "(rank 0, the others asleep) in the same job, in turns with the others; "
                "alone-micro = one device on the m micro-batches, accumulated", real,
                {"contender": "contender", "ranks": "ranks", "m": "m", "ms/step": "ms",
                 "tokens/s": "tokens_per_s", "× alone": "vs_one_device",
                 "× alone-micro": "vs_micro"}))
    memory_real = memory_real_rows(timed)
    print(table("GPT pipelines on 2 ranks: what each rank holds (parameters against the whole "
                "model's, at the last step's peak the micro-batches in flight and their boundary "
                "activations)", memory_real,
                {"contender": "contender", "rank": "rank", "param B": "param_bytes",
                 "model B": "model_bytes", "share": "share", "peak mb": "peak",
                 "peak act B": "peak_bytes"}))
    targets = {"bubble ≤ 1.1× formula at m ≥ 4p": [r["ok"] for r in bubbles
                                                     if r["ok"] is not None],
               "interleaved idle ≤ 1.1/v × 1F1B's": [r["ok"] for r in inter],
               "1F1B peak ≤ p − s, GPipe = m": [r["ok"] for r in memory]}
    print("\ntargets: " + "; ".join(f"{name}: {sum(oks)}/{len(oks)} met"
                                    for name, oks in targets.items()))
    figures = []
    if args.figures and importlib.util.find_spec("matplotlib") is not None:
        figures = draw(args.figures, bubbles, runs, calib)
        print("figures: " + ", ".join(figures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": describe(args.device), "quick": args.quick, "sizes": sizes,
                       "calibration": calib, "gpt": cfg, "bubbles": bubbles,
                       "interleaved": inter, "memory": memory, "schedules": compared,
                       "real": real, "real_memory": memory_real, "runs": runs, "figures": figures,
                       "load": [load[0], after],
                       "targets": {k: {"met": sum(v), "of": len(v)} for k, v in targets.items()}},
                      f, indent=2)
    return 0
