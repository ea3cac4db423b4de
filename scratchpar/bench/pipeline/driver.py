"""The pipeline benchmark: sleep-stage schedules at each p, a real GPT at 2 ranks, the tables."""

from __future__ import annotations

import os
from pathlib import Path

from ...parallel.pipeline import simulate
from ..harness import Benchmark, describe, draw_figures
from ..mpijob import job, per_world_size
from ..table import table
from . import report
from .stages import calibrate

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
WORKER = "scratchpar.bench.pipeline.worker"


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


def sleep_jobs(sizes: dict, calib: dict, figures: str | None) -> tuple[list[dict], tuple]:
    """Every run at each p, one job per p; and the load average before and after."""
    def measure(p: int) -> list[dict]:
        return job(p, f"{WORKER}:sleep_runs", {
            "forward_s": calib["forward_s"], "backward_s": calib["backward_s"], "rows": ROWS,
            "warmup": sizes["warmup"], "steps": sizes["steps"],
            "runs": runs_for(p, sizes, figures is not None), "traces": figures})

    results, load = per_world_size(sizes["ps"], measure)
    return [run for p in sizes["ps"] for run in results[p]], load


def draw(directory: str, bubbles: list[dict], runs: list[dict], calib: dict) -> list[str]:
    """The bubble curve and, for each traced schedule, its simulated and measured timelines."""
    from ...trace.pipeline_plot import measured_spans, plot_bubble_curve, plot_pipeline_timeline

    paths = [plot_bubble_curve(bubbles, str(Path(directory) / "pipeline_bubble.png"))]
    f, b = 1e3 * calib["forward_s"], 1e3 * calib["backward_s"]  # ms, as the measured spans
    for r in runs:
        if r["trace"]:
            schedule = report.schedule_for(r["schedule"], r["p"], r["m"], r["v"], f, b)
            ideal = simulate(schedule, f, b)
            paths.append(plot_pipeline_timeline(
                ideal, r["trace"].replace(".trace.json", ".png"), measured_spans(r["trace"]),
                title=f"{r['schedule']}: p={r['p']}, m={r['m']}, v={r['v']}, sleep stages "
                      f"(F {f:.1f} ms, B {b:.1f} ms per stage)"))
    return paths


def measure(args) -> dict:
    sizes, cfg = (QUICK, QUICK_GPT) if args.quick else (FULL, GPT)
    calib = calibrate(GPT)
    print(f"pipeline benchmark: sleep stages on the host, the GPT on {describe(args.device)}; "
          f"{os.cpu_count()} cores")
    print(f"calibration: GPT (d_model {GPT['d_model']}, {GPT['heads']} heads, {GPT['layers']} "
          f"blocks, T {GPT['seq']}, float32, CPU) cut in 2 stages by parameters, micro-batch "
          f"{calib['rows']} sequences: " + "; ".join(
              f"stage {s} (layers {st['layers'][0]}–{st['layers'][1] - 1}) forward "
              f"{1e3 * st['forward_s']:.2f} ms, backward {1e3 * st['backward_s']:.2f} ms"
              for s, st in enumerate(calib["stages"]))
          + f" → each sleep stage sleeps {1e3 * calib['forward_s']:.2f} ms forward, "
          f"{1e3 * calib['backward_s']:.2f} ms backward per micro-batch ({ROWS} rows)")
    runs, load = sleep_jobs(sizes, calib, args.figures)
    timed, (_, after) = per_world_size([2], lambda p: job(p, f"{WORKER}:real_runs", cfg,
                                                              args.device))
    timed = timed[2]
    runs = report.summarize(runs, calib)
    bubbles, inter = report.bubble_rows(runs), report.interleaved_rows(runs)
    memory, real = report.memory_rows(runs, max(sizes["ms"])), report.real_rows(timed, cfg)
    compared = [r for r in runs if r["compared"]]
    print(f"load average (1 min) before: {load[0]:.2f}, after: {after:.2f}; median of "
          f"{sizes['steps']} steps after {sizes['warmup']} warm-up")
    print(table("bubble, sleep stages, against the simulator and (p−1)/(m+p−1) (docs/pipeline.md, "
                "Measurements)", bubbles,
                {"schedule": "schedule", "p": "p", "m": "m", "measured": "bubble",
                 "simulated": "simulated", "formula": "formula", "measured/formula": "ratio",
                 f"≤{report.RATIO_TARGET}×": "ok",
                 "idle beyond ideal, ms/micro-batch": "extra_ms"}))
    print(table("interleaved against 1F1B at the same p, m", inter,
                {"p": "p", "m": "m", "v": "v", "measured": "bubble", "simulated": "simulated",
                 "formula": "formula", "1f1b": "1f1b_bubble", "idle ms": "idle_ms",
                 "1f1b idle ms": "1f1b_idle_ms", "ratio": "idle_ratio", "target": "target",
                 "met": "ok", "beyond ideal, ms/mb": "extra_ms"}))
    print(table("peak stashed activations per stage", memory,
                {"p": "p", "m": "m", "stage": "stage", "gpipe mb": "gpipe_peak",
                 "gpipe B": "gpipe_bytes", "1f1b mb": "1f1b_peak", "1f1b B": "1f1b_bytes",
                 "simulated": "1f1b_simulated", "p−s": "bound", "met": "ok"}))
    if compared:
        print(table(f"every schedule at p={COMPARED['p']}, sleep stages", compared,
                    {"schedule": "schedule", "m": "m", "v": "v", "measured": "bubble",
                     "simulated": "simulated", "formula": "formula"}))
    print(table(f"GPT (d_model {cfg['d_model']}, {cfg['layers']} blocks, T {cfg['seq']}, "
                f"batch {cfg['batch']}) against one device", real,
                {"contender": "contender", "ranks": "ranks", "m": "m", "ms/step": "ms",
                 "tokens/s": "tokens_per_s", "× alone": "vs_one_device",
                 "× alone-micro": "vs_micro"}))
    memory_real = report.memory_real_rows(timed)
    print(table("GPT pipelines on 2 ranks: what each rank holds", memory_real,
                {"contender": "contender", "rank": "rank", "param B": "param_bytes",
                 "model B": "model_bytes", "share": "share", "peak mb": "peak",
                 "peak act B": "peak_bytes"}))
    ratio = report.RATIO_TARGET
    targets = {f"bubble ≤ {ratio}× formula at m ≥ 4p": [r["ok"] for r in bubbles
                                                        if r["ok"] is not None],
               f"interleaved idle ≤ {ratio}/v × 1F1B's": [r["ok"] for r in inter],
               "1F1B peak ≤ p − s, GPipe = m": [r["ok"] for r in memory]}
    print("\ntargets: " + "; ".join(f"{name}: {sum(oks)}/{len(oks)} met"
                                    for name, oks in targets.items()))
    figures = draw_figures(args.figures, draw, bubbles, runs, calib, without="; traces only")
    return {"sizes": sizes, "calibration": calib, "gpt": cfg, "bubbles": bubbles,
            "interleaved": inter, "memory": memory, "schedules": compared, "real": real,
            "real_memory": memory_real, "runs": runs, "figures": figures,
            "load": [load[0], after],
            "targets": {k: {"met": sum(v), "of": len(v)} for k, v in targets.items()}}


BENCHMARK = Benchmark("pipeline bubbles, stashed activations and throughput against the "
                      "formulas and one device", "p = 2, 4, three m, a tiny GPT", measure,
                      figures="pipeline_bubble.png, a Gantt timeline per schedule and the Chrome "
                              "traces they come from")
