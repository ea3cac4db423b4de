"""The pipeline benchmark: sleep-stage schedules at each p, a real GPT at 2 ranks, the tables."""

from __future__ import annotations

import os

from ...jobs.harness import Benchmark, describe, draw_figures, machine
from ...jobs.mpijob import job
from ...parallel.pipeline import simulate
from ...table import printed
from .worker import calibrate, schedule_for, trace_name

GPT = {"vocab": 64, "seq": 64, "d_model": 128, "heads": 4, "layers": 4, "batch": 64, "m": 8,
       "warmup": 2, "repeats": 8}  # the real model; its p = 2 stages calibrate the sleeps
QUICK_GPT = {"vocab": 32, "seq": 16, "d_model": 32, "heads": 2, "layers": 2, "batch": 8, "m": 4,
             "warmup": 1, "repeats": 2}
FULL = {"ps": [2, 4, 8], "ms": [1, 2, 4, 8, 16, 32], "vs": [2, 4], "per_p": [1, 4],
        "warmup": 1, "steps": 4}  # interleaved at m = per_p · p
QUICK = {"ps": [2, 4], "ms": [1, 4, 8], "vs": [2], "per_p": [2], "warmup": 1, "steps": 2}
ROWS = 8  # rows of a sleep-stage micro-batch
COMPARED_P, COMPARED = 4, [("gpipe", 8, 1), ("1f1b", 8, 1), ("interleaved", 8, 2),
                           ("naive", 1, 1), ("bprio", 8, 1), ("pipedream", 8, 1)]  # (name, m, v)
WORKER = "scratchpar.bench.pipeline.worker"
RATIO_TARGET = 1.1  # docs/pipeline.md: measured bubble / formula at m ≥ 4p; interleaved / v


def runs_for(p: int, sizes: dict, figures: bool) -> list[dict]:
    """The schedules run at p stages: GPipe and 1F1B over m, 1F1B, ZB-H1 and interleaved at
    m = per_p·p, and at the compared p every schedule at the compared m (traced for figures)."""
    keys = [(s, m, 1) for s in ("gpipe", "1f1b") for m in sizes["ms"]]
    keys += [(s, k * p, v) for k in sizes["per_p"] for v in (1, *sizes["vs"])
             for s in (("1f1b", "zb-h1") if v == 1 else ("interleaved",))]
    compared = COMPARED if p == COMPARED_P else []
    return [{"schedule": s, "m": m, "v": v, "compared": (s, m, v) in compared,
             "trace": figures and (s, m, v) in compared}
            for s, m, v in dict.fromkeys(keys + compared)]


def find(runs: list[dict], schedule: str, p: int, m: int) -> dict:
    """The run of ``schedule`` at p stages and m micro-batches, v = 1."""
    return next(r for r in runs if (r["schedule"], r["p"], r["m"], r["v"]) == (schedule, p, m, 1))


def against_1f1b(runs: list[dict], schedule: str, keys: tuple, ideal_ratio) -> list[dict]:
    """``schedule``'s runs (``keys`` of each) against 1F1B's at the same p and m: the ratio of
    their idle times per rank, its ``ideal_ratio(run)`` and the target, RATIO_TARGET × ideal."""
    rows = []
    for r in (r for r in runs if r["schedule"] == schedule):
        base = find(runs, "1f1b", r["p"], r["m"])
        ratio, best = r["idle_s"] / base["idle_s"], ideal_ratio(r)
        rows.append({**{k: r[k] for k in keys}, "1f1b_bubble": base["bubble"],
                     "idle_ratio": ratio, "ideal": best, "target": RATIO_TARGET * best,
                     "ok": ratio <= RATIO_TARGET * best})
    return rows


def bubble_rows(runs: list[dict]) -> list[dict]:
    """GPipe and 1F1B over m against the formula; the target applies once m ≥ 4p."""
    return [{**{k: r[k] for k in ("schedule", "p", "m", "bubble", "simulated", "formula")},
             "ratio": r["bubble"] / r["formula"],
             "ok": r["bubble"] / r["formula"] <= RATIO_TARGET if r["m"] >= 4 * r["p"] else None,
             "extra_ms": r["extra_ms"]} for r in runs if r["schedule"] in ("gpipe", "1f1b")]


def memory_rows(runs: list[dict], m: int) -> list[dict]:
    """Peak micro-batches and boundary-activation bytes per stage at the largest m, 1F1B beside
    GPipe: 1F1B holds at most p − s on stage s (Narayanan et al. 2021, §2.1), GPipe all m."""
    return [{"p": p, "m": m, "stage": s, "gpipe_peak": gpipe["peak"][s],
             "gpipe_bytes": gpipe["peak_bytes"][s], "1f1b_peak": ofob["peak"][s],
             "1f1b_bytes": ofob["peak_bytes"][s], "1f1b_simulated": ofob["simulated_peak"][s],
             "bound": p - s, "ok": ofob["peak"][s] <= p - s and gpipe["peak"][s] == m}
            for p in sorted({r["p"] for r in runs})
            for gpipe, ofob in [(find(runs, "gpipe", p, m), find(runs, "1f1b", p, m))]
            for s in range(p)]


def real_rows(timed: dict, cfg: dict) -> list[dict]:
    """Tokens per second of each contender, and its ratio to one device on the whole batch and
    on the m micro-batches (which on a CPU alone runs faster per token)."""
    tokens, one = cfg["batch"] * cfg["seq"], timed["alone"]["median_s"]
    micro = timed["alone-micro"]["median_s"]
    return [{"contender": name, "ranks": 1 if name.startswith("alone") else 2,
             "m": 1 if name in ("alone", "dp", "naive") else cfg["m"],
             "ms": 1e3 * t["median_s"], "tokens_per_s": tokens / t["median_s"],
             "vs_one_device": one / t["median_s"], "vs_micro": micro / t["median_s"]}
            for name, t in timed.items()]


def draw(directory: str, bubbles: list[dict], calib: dict) -> list[str]:
    """pipeline_bubble.png, and each compared schedule's simulated timeline above the measured
    one of its trace in ``directory``."""
    from ...trace.pipeline_plot import measured_spans, plot_bubble_curve, plot_pipeline_timeline

    f, b, w = (1e3 * calib[k] for k in ("forward_s", "backward_s", "weight_s"))  # ms
    drawn = [plot_bubble_curve(bubbles, os.path.join(directory, "pipeline_bubble.png"))]
    for s, m, v in COMPARED:
        trace = os.path.join(directory, trace_name(s, COMPARED_P, m, v))
        ideal = simulate(schedule_for(s, COMPARED_P, m, v, f, b, w), f, b, w)
        drawn.append(plot_pipeline_timeline(
            ideal, trace.replace(".trace.json", ".png"),
            measured_spans(trace), title=f"{s}: p={COMPARED_P}, m={m}, v={v}, sleep stages "
                                         f"(F {f:.1f} ms, B {b:.1f} ms per stage)"))
    return drawn


def measure(args) -> dict:
    sizes, cfg = (QUICK, QUICK_GPT) if args.quick else (FULL, GPT)
    calib = calibrate(GPT)
    print(f"pipeline benchmark: sleep stages on the host (polled up to p = "
          f"{len(os.sched_getaffinity(0))}, a core a rank; slept beyond), the GPT on "
          f"{describe(args.device)}; {machine(args)}; median of {sizes['steps']} steps after "
          f"{sizes['warmup']} warm-up")
    ms = {k: 1e3 * calib[k] for k in ("forward_s", "backward_s", "weight_s")}
    print(f"calibration: GPT (d_model {GPT['d_model']}, {GPT['layers']} blocks, T {GPT['seq']}, "
          f"float32) cut in 2 by parameters, {calib['rows']} sequences a micro-batch: " + "; ".join(
              f"stage {s} forward {1e3 * st['forward_s']:.2f} ms, backward "
              f"{1e3 * st['backward_s']:.2f} ms" for s, st in enumerate(calib["stages"]))
          + " → each sleep stage {forward_s:.2f} ms forward, {backward_s:.2f} ms backward, of it "
          "{weight_s:.2f} ms the weights' gradients (ZB-H1's W)".format_map(ms))
    runs = [run for p in sizes["ps"] for run in job(p, f"{WORKER}:sleep_runs", {
        **{k: calib[k] for k in ("forward_s", "backward_s", "weight_s")}, "rows": ROWS,
        "warmup": sizes["warmup"], "steps": sizes["steps"], "traces": args.figures,
        "runs": runs_for(p, sizes, args.figures is not None)})]
    real = job(2, f"{WORKER}:real_runs", cfg, args.device)
    f, b, w = (calib[k] for k in ("forward_s", "backward_s", "weight_s"))
    # interleaved's ideal ratio is 1/v (Narayanan et al. 2021, §2.2: the bubble time
    # (p−1)(t_f+t_b)/v); ZB-H1's (T_F + T_B − T_W)/(T_F + T_B + T_W), B the input gradient
    # alone (Qi et al. 2023, §3.1: ZB-H1's bubble (p−1)(T_F + T_B − T_W), 1F1B's (p−1)(T_F +
    # T_B + T_W))
    found = printed({  # the JSON's key: (the printed title, the rows)
        "bubbles": (f"bubble, sleep stages, against the simulator and (p−1)/(m+p−1); ok: ≤ "
                    f"{RATIO_TARGET}× once m ≥ 4p; extra_ms: idle beyond the ideal per "
                    "micro-batch", bubble_rows(runs)),
        "interleaved": ("interleaved against 1F1B at the same p, m", against_1f1b(
            runs, "interleaved", ("p", "m", "v", "bubble", "simulated", "formula"),
            lambda r: 1 / r["v"])),
        "zero_bubble": ("ZB-H1 against 1F1B at the same p, m: B the input gradient, W the "
                        "weights' later", against_1f1b(runs, "zb-h1", (
                            "p", "m", "bubble", "simulated"), lambda r: (f + b - 2 * w) / (f + b))),
        "memory": ("peak stashed activations per stage", memory_rows(runs, max(sizes["ms"]))),
        "schedules": (f"every schedule at p={COMPARED_P}, sleep stages", [
            {k: r[k] for k in ("schedule", "m", "v", "bubble", "simulated", "formula")}
            for r in runs if r["compared"]]),
        "real": (f"GPT (d_model {cfg['d_model']}, {cfg['layers']} blocks, T {cfg['seq']}, "
                 f"batch {cfg['batch']}) against one device", real_rows(real["timed"], cfg)),
        "real_memory": ("GPT pipelines on 2 ranks: what each rank holds", real["memory"])})
    judged = {f"bubble ≤ {RATIO_TARGET}× formula at m ≥ 4p": [
                  r for r in found["bubbles"] if r["ok"] is not None],  # m ≥ 4p
              f"interleaved idle ≤ {RATIO_TARGET}/v × 1F1B's": found["interleaved"],
              f"ZB-H1 idle ≤ {RATIO_TARGET} × ideal × 1F1B's": found["zero_bubble"],
              "1F1B peak ≤ p − s, GPipe = m": found["memory"]}
    targets = {name: {"met": sum(r["ok"] for r in rows), "of": len(rows)}
               for name, rows in judged.items()}
    print("\ntargets: " + "; ".join(f"{name}: {t['met']}/{t['of']} met"
                                    for name, t in targets.items()))
    return {"sizes": sizes, "calibration": calib, "gpt": cfg, **found, "targets": targets,
            "figures": draw_figures(args.figures, draw, found["bubbles"], calib,
                                    without="; traces only")}


BENCHMARK = Benchmark("pipeline bubbles, stashed activations and throughput against the "
                      "formulas and one device", "p = 2, 4, three m, a tiny GPT", measure,
                      figures="pipeline_bubble.png, a Gantt timeline per schedule and the Chrome "
                              "traces they come from")
