"""The ZeRO benchmark: one MPI job per world size (and the GPU search), then the tables."""

from __future__ import annotations

import os
from pathlib import Path

from ...jobs.harness import Benchmark, describe, draw_figures, ints, machine, verdict
from ...jobs.mpijob import job
from ...parallel.zero.formula import PARTS as FORMULA_PARTS
from ...parallel.zero.formula import formula
from ...table import table
from .worker import CONTENDERS, FLOAT32, stage_of

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
                  "bucket_kib": 1024}, "head_dim": 64, "start": 128, "max_d_model": 8192,
        "budget_gib": 2.0}  # CuPy's pool limit per rank in the search for the widest GPT
QUICK_FITS = {**FITS, "model": {**FITS["model"], "seq": 64, "layers": 2, "batch": 4},
              "head_dim": 32, "start": 64, "max_d_model": 1024}
FIT_RANKS = 2
WORKER = "scratchpar.bench.zero.worker"
FITS_TIMEOUT_S = 1800  # 7 searches of ~8 steps, some waiting out worker.FIT_TIMEOUT_S
SHORT = dict(zip(FORMULA_PARTS, ("params", "grads", "optim", "host")))
NAMED = {"buckets": ("buckets",), "gathered": ("gathered",),
         "scratch": ("scratch", "host scratch")}  # column → the ledger's parts it sums
LABELS = {name: ("DP" if stage == 0 else f"ZeRO-{stage}") + (" offload" if off else "")
          for name in CONTENDERS for stage, off in [stage_of(name)]}
KiB, MiB = 1 << 10, 1 << 20
TARGET = 1.5  # docs/zero.md: ZeRO-3's step ≤ TARGET × DP's
TARGET_RANKS = 2
OFFLOAD_COLUMNS = {"N": "ranks", "contender": "label", "ms/step": "step_ms",
                   "rank 0 ms": "own_ms", "forward": "forward_ms",
                   "backward + comm": "rest_ms", "copies": "copy_ms", "update": "update_ms",
                   "copies %": "copy_pct"}
FITS_COLUMNS = {"contender": "label", "d_model": "d_model", "Ψ (M)": "params_m",
                "at the cap": "capped", "tried": "tried"}


def unit(psi: int) -> tuple[str, int]:
    """MiB for a model of 4 MiB or more, else KiB (a tiny model's parts would all read 0.00)."""
    return ("MiB", MiB) if psi * FLOAT32 >= 4 * MiB else ("KiB", KiB)


def memory_rows(results: dict, model: str) -> list[dict]:
    """Per world size and contender, rank 0's peaks in bytes (it holds the larger chunks): each
    part the formula names beside the formula's, the ratio of their sums, the named buffers
    beyond the formula and the activations."""
    rows = []
    for n, res in results.items():
        mem = res["memory"][model]
        for name in CONTENDERS:
            held = mem["ranks"][name][0]
            stage, offload = stage_of(name)
            want = formula(stage, mem["psi"], n, FLOAT32, 2 * FLOAT32, offload)  # AdamW: k = 8
            row = {"ranks": n, "contender": name, "label": LABELS[name],
                   "largest_group": held["largest_group"], "activations": held["activations"],
                   **{p: held["peak"].get(p, 0) for p in FORMULA_PARTS},
                   **{f"formula_{p}": round(want.get(p, 0.0)) for p in FORMULA_PARTS},
                   **{c: sum(held["peak"].get(p, 0) for p in parts) for c, parts in NAMED.items()}}
            row["ratio"] = sum(row[p] for p in FORMULA_PARTS) / sum(
                row[f"formula_{p}"] for p in FORMULA_PARTS)
            rows.append(row)
    return rows


def memory_columns(scale: int) -> dict:
    """The memory table's columns, every byte count in ``scale`` units."""
    def scaled(key):
        return lambda row: row[key] / scale

    return {"N": "ranks", "contender": "label",
            **{SHORT[p]: scaled(p) for p in FORMULA_PARTS},
            **{f"f.{SHORT[p]}": scaled(f"formula_{p}") for p in FORMULA_PARTS},
            "measured/formula": "ratio", **{c: scaled(c) for c in (*NAMED, "activations")}}


def step_ms(res: dict, name: str) -> float:
    return 1e3 * res["timing"]["timed"][name]["median_s"]


def timing_rows(results: dict) -> list[dict]:
    """Per contender, its median step at each world size and its ratio to DP's."""
    return [{"contender": name, "label": LABELS[name],
             **{k: v for n, res in results.items() for k, v in (
                 (f"ms_{n}", step_ms(res, name)),
                 (f"vs_dp_{n}", step_ms(res, name) / step_ms(res, "dp")))}}
            for name in CONTENDERS]


def timing_columns(ranks: list[int]) -> dict[str, str]:
    return {"contender": "label", **{h: k for n in ranks for h, k in (
        (f"ms/step N={n}", f"ms_{n}"), (f"× DP N={n}", f"vs_dp_{n}"))}}


def zero3_target(results: dict, device: str) -> dict | None:
    """ZeRO-3's step over DP's at TARGET_RANKS ranks (or the smallest world timed)."""
    if not results:
        return None
    n = target_ranks(list(results))
    ratio = step_ms(results[n], "zero3") / step_ms(results[n], "dp")
    return {"ranks": n, "ratio": ratio, "target": TARGET,
            "verdict": verdict(device, ratio <= TARGET)}


def offload_rows(results: dict) -> list[dict]:
    """Per world size and stage, with and without offload: the step (slowest rank's median),
    rank 0's medians of forward, copies and update, and the rest of its step."""
    rows = []
    for n, res in results.items():
        for name in (f"zero{s}{o}" for s in (1, 2, 3) for o in ("", "-offload")):
            ms = {k.removesuffix("_s"): 1e3 * v for k, v in res["timing"]["split"][name].items()}
            rows.append({"ranks": n, "stage": stage_of(name)[0], "contender": name,
                         "label": LABELS[name], "step_ms": step_ms(res, name),
                         "own_ms": ms["total"], "forward_ms": ms["forward"],
                         "rest_ms": ms["total"] - ms["forward"] - ms["copy"] - ms["update"],
                         "copy_ms": ms["copy"], "update_ms": ms["update"],
                         "copy_pct": 100 * ms["copy"] / ms["total"]})
    return rows


def fits_rows(fits: dict) -> list[dict]:
    """Per contender, the widest GPT that trained within the budget, and what was tried."""
    return [{"contender": name, "label": LABELS[name], "d_model": got["d_model"],
             "params_m": got["params"] / 1e6 if got["params"] else None,
             "capped": got["capped"],
             "tried": " ".join(f"{d}{'✓' if ok else '✗'}" for d, ok in got["tried"])}
            for name in CONTENDERS if (got := fits["largest"].get(name)) is not None]


def shape(spec: dict) -> str:
    return (f"GPT d_model {spec['d_model']}, {spec['layers']} layers, {spec['heads']} heads, "
            f"V {spec['vocab']}, T {spec['seq']}, batch {spec['batch']}, buckets "
            f"{spec['bucket_kib']} KiB")


def target_ranks(ranks: list[int]) -> int:
    """The world size the target is judged and the ZeRO-3 step traced at."""
    return TARGET_RANKS if TARGET_RANKS in ranks else min(ranks)


def print_tables(rows: dict, results: dict, models: dict, timing: dict, target: dict,
                 fits: dict | None, fit_cfg: dict, device: str) -> None:
    """Every part's tables (docs/zero.md, The formula beside the measured bytes, Offload)."""
    for model, spec in models.items():
        psi = results[min(results)]["memory"][model]["psi"]
        name, scale = unit(psi)
        largest = max(r["largest_group"] for r in rows["memory"][model]
                      if r["contender"] == "zero1")
        print(table(f"1. bytes per rank ({name}), {shape(spec)}, Ψ = {psi:,}: rank 0's peak per "
                    f"part beside the formula's (f.); ZeRO-1's grads include its largest bucket, "
                    f"{largest / scale:.2f} {name}", rows["memory"][model],
                    memory_columns(scale)))
    ranks, cores = sorted(results), os.cpu_count() or 1
    over = [n for n in ranks if n > cores]
    note = (f"; N = {', '.join(map(str, over))} is oversubscribed ({over[0]} ranks on {cores} "
            "cores): its ratios, not its times, are the figure" if over else "")
    print(table(f"2. step time, {shape(models['cli'])}: median of {timing['repeats']} steps "
                f"after {timing['warmup']} warm-up{note}", timing_rows(results),
                timing_columns(ranks)))
    print(f"\nZeRO-3 ≤ {target['target']}× DP: {target['verdict']} "
          f"({target['ratio']:.2f}×, N = {target['ranks']})")
    print(table("3. offload's step against the stage on the device (ms)", rows["offload"],
                OFFLOAD_COLUMNS))
    if fits is None:
        print(f"\n4. the widest GPT that fits a GPU needs a GPU (--device cuda): skipped on "
              f"{device}")
        return
    m = fit_cfg["model"]
    print(table(f"4. the widest GPT each contender trains within {fit_cfg['budget_gib']:g} GiB per "
                f"rank, N = {FIT_RANKS} ranks on {describe(device)}: {m['layers']} layers, T "
                f"{m['seq']}, batch {m['batch']}; tried: ✓ fits, ✗ out of memory",
                fits_rows(fits), FITS_COLUMNS))


def draw(directory: str, rows: dict, models: dict, results: dict) -> list[str]:
    from ...trace.timeline_plot import plot_timeline
    from .plot import plot_memory, plot_offload

    out, n, cli = Path(directory), target_ranks(list(results)), models["cli"]
    psi, large = results[min(results)]["memory"]["large"]["psi"], models["large"]
    trace = out / "zero3_timeline.trace.json"
    return [plot_memory(rows["memory"]["large"], unit(psi),
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
    fit_cfg = QUICK_FITS if quick else FITS
    ranks = sorted(set(args.ranks or ([2] if quick else [2, 4])))
    if ranks[0] < 1:
        raise SystemExit(f"zero: every world size must be ≥ 1, got {ranks}")
    trace = str(Path(args.figures).resolve() / "zero3_timeline.trace.json") \
        if args.figures else None
    results = {n: job(n, f"{WORKER}:world", {"models": models, **timing, "trace": trace if n
                                            == target_ranks(ranks) else None}, args.device)
               for n in ranks}
    fits = job(FIT_RANKS, f"{WORKER}:fits", {**fit_cfg, "contenders": list(CONTENDERS)},
               args.device, timeout=FITS_TIMEOUT_S) if args.device == "cuda" else None
    rows = {"memory": {m: memory_rows(results, m) for m in models},
            "timing": timing_rows(results), "offload": offload_rows(results)}
    target = zero3_target(results, args.device)
    print(f"zero benchmark on {describe(args.device)}, {machine(args)}; world sizes "
          f"{ranks}")
    print_tables(rows, results, models, timing, target, fits, fit_cfg, args.device)
    figures = draw_figures(args.figures, draw, rows, models, results, without="; trace only")
    return {"ranks": ranks, "models": models, **rows, "target": target, "fits": fits,
            "figures": figures}


BENCHMARK = Benchmark("ZeRO stages 1-3 and offload: bytes per rank against the formula, step "
                      "time against DP, offload's copies", "tiny GPTs, a few steps, N = 2 only",
                      measure, lambda parser: parser.add_argument(
                          "--ranks", type=ints, help="comma-separated world sizes, one job each "
                          "(default 2,4; --quick: 2)"), indent=1,
                      figures="zero_memory.png, zero3_timeline.png with its Chrome trace, and "
                              "zero_offload.png")
