"""The ZeRO benchmark: one MPI job per world size (and the GPU search), then the tables."""

from __future__ import annotations

import os
from pathlib import Path

from ..harness import Benchmark, describe, draw_figures, ints, judged, machine
from ..mpijob import job, per_world_size
from ..table import table
from . import report

CLI_GPT = {"vocab": 32, "seq": 64, "d_model": 64, "heads": 4, "layers": 2, "batch": 32,
           "grad_clip": 1.0, "steps": 2}  # scratchpar/train/config.py's defaults
MODELS = {"cli": {**CLI_GPT, "bucket_kib": 64},
          "large": {**CLI_GPT, "d_model": 256, "layers": 4, "bucket_kib": 1024}}
TINY = {**CLI_GPT, "vocab": 16, "seq": 16, "heads": 2, "layers": 4, "batch": 8, "steps": 1}
QUICK_MODELS = {"cli": {**TINY, "d_model": 16, "bucket_kib": 4},
                "large": {**TINY, "d_model": 32, "bucket_kib": 16}}
TIMING = {"warmup": 3, "repeats": 20}
QUICK_TIMING = {"warmup": 1, "repeats": 2}
FITS = {"model": {"vocab": 32, "seq": 256, "layers": 8, "batch": 8, "grad_clip": 1.0,
                  "bucket_kib": 1024}, "head_dim": 64, "start": 128, "max_d_model": 8192}
QUICK_FITS = {"model": {**FITS["model"], "seq": 64, "layers": 2, "batch": 4},
              "head_dim": 32, "start": 64, "max_d_model": 1024}
FIT_RANKS = 2
WORKER = "scratchpar.bench.zero.worker"
FITS_TIMEOUT_S = 1800  # 7 searches of ~8 steps, some waiting out worker.FIT_TIMEOUT_S


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=ints,
                        help="comma-separated world sizes, one job each (default 2,4; --quick: 2)")
    parser.add_argument("--gpu-budget-gib", type=float, default=2.0,
                        help="--device cuda: the memory each rank may take (CuPy's pool limit) "
                             "in the search for the widest GPT; default 2")


def shape(spec: dict) -> str:
    return (f"GPT d_model {spec['d_model']}, {spec['layers']} layers, {spec['heads']} heads, "
            f"V {spec['vocab']}, T {spec['seq']}, batch {spec['batch']}, buckets "
            f"{spec['bucket_kib']} KiB")


def trace_ranks(ranks: list[int]) -> int:
    return report.TARGET_RANKS if report.TARGET_RANKS in ranks else min(ranks)


def run_jobs(ranks: list[int], models: dict, timing: dict, figures: str | None,
             device: str) -> tuple[dict, tuple]:
    """Per world size, one job: memory, then timing (with the trace at trace_ranks)."""
    trace = str(Path(figures).resolve() / "zero3_timeline.trace.json") if figures else None

    def measure(n: int) -> dict:
        return job(n, f"{WORKER}:world", {"memory": {"models": models}, "timing": {
            **timing, "model": models["cli"], "trace": trace if n == trace_ranks(ranks) else None}},
                   device)

    return per_world_size(ranks, measure)


def print_tables(rows: dict, results: dict, models: dict, timing: dict, target: dict,
                 fits: dict | None, fit_cfg: dict, device: str) -> None:
    """Every part's tables (docs/zero.md, The formula beside the measured bytes, Offload)."""
    for model, spec in models.items():
        psi, itemsize = (results[min(results)]["memory"][model][k] for k in ("psi", "itemsize"))
        name, scale = report.unit(psi, itemsize)
        largest = max(r["largest_group"] for r in rows["memory"][model]
                      if r["contender"] == "zero1")
        print(table(f"1. bytes per rank ({name}), {shape(spec)}, Ψ = {psi:,}: rank 0's peak per "
                    f"part beside the formula's (f.); ZeRO-1's grads include its largest bucket, "
                    f"{largest / scale:.2f} {name}", rows["memory"][model],
                    report.memory_columns(scale)))
    ranks, cores = sorted(results), os.cpu_count() or 1
    over = [n for n in ranks if n > cores]
    note = (f"; N = {', '.join(map(str, over))} is oversubscribed ({over[0]} ranks on {cores} "
            "cores): its ratios, not its times, are the figure" if over else "")
    print(table(f"2. step time, {shape(models['cli'])}: median of {timing['repeats']} steps "
                f"after {timing['warmup']} warm-up{note}", report.timing_rows(results),
                report.timing_columns(ranks)))
    print(f"\nZeRO-3 ≤ {target['target']}× DP: {judged(device, target['verdict'])} "
          f"({target['ratio']:.2f}×, N = {target['ranks']})")
    print(table("3. offload's step against the stage on the device (ms)", rows["offload"],
                report.OFFLOAD_COLUMNS))
    if fits is None:
        print(f"\n4. the widest GPT that fits a GPU needs a GPU (--device cuda): skipped on "
              f"{device}")
        return
    m = fit_cfg["model"]
    print(table(f"4. the widest GPT each contender trains within {fit_cfg['budget_gib']:g} GiB per "
                f"rank, N = {FIT_RANKS} ranks on {describe(device)}: {m['layers']} layers, T "
                f"{m['seq']}, batch {m['batch']}; tried: ✓ fits, ✗ out of memory",
                report.fits_rows(fits), report.FITS_COLUMNS))


def draw(directory: str, rows: dict, models: dict, results: dict) -> list[str]:
    from ...trace.timeline_plot import plot_timeline
    from .plot import plot_memory, plot_offload

    out, n, cli = Path(directory), trace_ranks(sorted(results)), models["cli"]
    mem, large = results[min(results)]["memory"]["large"], models["large"]
    psi, trace = mem["psi"], out / "zero3_timeline.trace.json"
    return [plot_memory(rows["memory"]["large"], report.unit(psi, mem["itemsize"]),
                        f"GPT d_model {large['d_model']}, {large['layers']} layers, Ψ = {psi:,}, "
                        f"AdamW float32, buckets {large['bucket_kib']} KiB",
                        str(out / "zero_memory.png")),
            plot_timeline(str(trace), str(out / "zero3_timeline.png"),
                          title=f"one ZeRO-3 step, N = {n}, GPT d_model {cli['d_model']}, "
                                f"{cli['layers']} layers: compute, collectives, each layer "
                                "gathered (memory)"),
            plot_offload(rows["offload"], n, str(out / "zero_offload.png"))]


def measure(args) -> dict:
    quick = args.quick
    models, timing = (QUICK_MODELS, QUICK_TIMING) if quick else (MODELS, TIMING)
    fit_cfg = {**(QUICK_FITS if quick else FITS), "budget_gib": args.gpu_budget_gib}
    ranks = sorted(set(args.ranks or ([2] if quick else [2, 4])))
    if ranks[0] < 1:
        raise SystemExit(f"zero: every world size must be ≥ 1, got {ranks}")
    results, (before, after) = run_jobs(ranks, models, timing, args.figures, args.device)
    fits = job(FIT_RANKS, f"{WORKER}:fits", {**fit_cfg, "contenders": list(report.CONTENDERS)},
               args.device, timeout=FITS_TIMEOUT_S) if args.device == "cuda" else None
    rows = {"memory": {m: report.memory_rows(results, m) for m in models},
            "timing": report.timing_rows(results), "offload": report.offload_rows(results)}
    target = report.target(results)
    print(f"zero benchmark on {describe(args.device)}, {machine((before, after))}; world sizes "
          f"{ranks}")
    print_tables(rows, results, models, timing, target, fits, fit_cfg, args.device)
    figures = draw_figures(args.figures, draw, rows, models, results, without="; trace only")
    return {"ranks": ranks, "models": models, "timing_config": timing, "fits_config": fit_cfg,
            **rows, "target": target, "fits": fits,
            "fits_rows": report.fits_rows(fits) if fits else None,
            "results": {str(n): r for n, r in results.items()}, "figures": figures,
            "load": [before, after]}


BENCHMARK = Benchmark("ZeRO stages 1-3 and offload: bytes per rank against the formula, step "
                      "time against DP, offload's copies", "tiny GPTs, a few steps, N = 2 only",
                      measure, add_arguments, indent=1,
                      figures="zero_memory.png, zero3_timeline.png with its Chrome trace, and "
                              "zero_offload.png")
