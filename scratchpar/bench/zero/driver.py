"""The ZeRO benchmark: one MPI job per world size (and the GPU search), then the tables."""

from __future__ import annotations

import os
from pathlib import Path

from ...jobs.harness import Benchmark, Ranks, describe, draw_figures, headline, judge
from ...jobs.mpijob import job
from ...parallel.zero.formula import PARTS, formula
from ...table import table
from ...train.memory_models import KiB, MiB
from .worker import CONTENDERS, FLOAT32, stage_of

CLI = {"vocab": 32, "seq": 64, "d_model": 64, "heads": 4, "layers": 2, "batch": 32,
       "grad_clip": 1.0, "steps": 2, "bucket_kib": 64}  # scratchpar/train/config.py's defaults
TINY = {**CLI, "vocab": 16, "seq": 16, "heads": 2, "layers": 4, "batch": 8, "steps": 1}
FITS = {"model": {"vocab": 32, "seq": 256, "layers": 8, "batch": 8, "grad_clip": 1.0,
                  "bucket_kib": 1024}, "head_dim": 64, "start": 128, "max_d_model": 8192,
        "budget_gib": 2.0}  # CuPy's pool limit per rank in the search for the widest GPT
CONFIG = {"models": {"cli": CLI, "large": {**CLI, "d_model": 256, "layers": 4,
                                           "bucket_kib": 1024}},
          "warmup": 3, "repeats": 20, "fits": FITS}
QUICK = {"models": {"cli": {**TINY, "d_model": 16, "bucket_kib": 4},
                    "large": {**TINY, "d_model": 32, "bucket_kib": 16}},
         "warmup": 1, "repeats": 2,
         "fits": {**FITS, "model": {**FITS["model"], "seq": 64, "layers": 2, "batch": 4},
                  "head_dim": 32, "start": 64, "max_d_model": 1024}}
WORKER, TRACE = "scratchpar.bench.zero.worker", "zero3_timeline.trace.json"
FIT_RANKS, FITS_TIMEOUT_S = 2, 1800  # 7 searches of ~8 steps, some waiting out FIT_TIMEOUT_S
TARGET, TARGET_RANKS = 1.5, 2  # docs/zero.md: ZeRO-3's step ≤ TARGET × DP's
SHORT = dict(zip(PARTS, ("params", "grads", "optim", "host")))
BEYOND = {"buckets": ("buckets",), "gathered": ("gathered",),
          "scratch": ("scratch", "host scratch")}  # column → the ledger's parts it sums
LABELS = {name: ("DP" if stage == 0 else f"ZeRO-{stage}") + (" offload" if off else "")
          for name in CONTENDERS for stage, off in [stage_of(name)]}


def states(n: int, name: str, peak: dict, psi: int, itemsize: int, k: int, scale: int) -> dict:
    """Rank 0's peak of each part ZeRO's formula names (Rajbhandari et al. 2020, §5) beside the
    formula's, in units of ``scale`` bytes, and measured/formula of their sums."""
    stage, offload = stage_of(name)
    want = formula(stage, psi, n, itemsize, k, offload)
    return {"N": n, "contender": LABELS[name],
            **{SHORT[p]: peak.get(p, 0) / scale for p in PARTS},
            **{f"f.{SHORT[p]}": want.get(p, 0) / scale for p in PARTS},
            "measured/formula": sum(peak.get(p, 0) for p in PARTS) / sum(want.values())}


def memory_rows(results: dict, model: str) -> dict:
    """``model``'s Ψ and unit (MiB from 4 MiB of parameters, else KiB: a tiny model's parts would
    read 0.00), and per world size and contender rank 0's bytes in that unit (it holds the
    larger chunks): :func:`states` under AdamW in float32 (k = 8), the buffers beyond the
    formula and the graph's activations after forward."""
    psi = results[min(results)]["memory"][model]["psi"]
    name, scale = ("MiB", MiB) if psi * FLOAT32 >= 4 * MiB else ("KiB", KiB)
    rows = []
    for n, res in results.items():
        for contender, held in res["memory"][model]["held"].items():
            peak = held["peak"]
            rows.append({**states(n, contender, peak, psi, FLOAT32, 2 * FLOAT32, scale),
                         **{col: sum(peak.get(p, 0) for p in parts) / scale
                            for col, parts in BEYOND.items()},
                         "activations": held["activations"] / scale})
    return {"psi": psi, "unit": name, "rows": rows}


def step_rows(results: dict) -> list[dict]:
    """Per world size and contender, the step (the slowest rank's median) and its ratio to DP's;
    rank 0's medians of its step, forward, copies and update, and the rest of its step."""
    rows = []
    for n, res in results.items():
        timed, split = res["timing"]["timed"], res["timing"]["split"]
        for name in CONTENDERS:
            ms = {key.removesuffix("_s"): 1e3 * s for key, s in split[name].items()}
            rest = ms["total"] - ms["forward"] - ms["copy"] - ms["update"]
            rows.append({"N": n, "contender": LABELS[name],
                         "ms/step": 1e3 * timed[name]["median_s"],
                         "× DP": timed[name]["median_s"] / timed["dp"]["median_s"],
                         "rank 0 ms": ms["total"], "forward": ms["forward"],
                         "backward + comm": rest, "copies": ms["copy"], "update": ms["update"],
                         "copies %": 100 * ms["copy"] / ms["total"]})
    return rows


def checkpoint_rows(results: dict) -> list[dict]:
    """Per world size and way, ZeRO-3's save and resume (the slowest rank's medians) and the
    megabytes its busiest rank writes."""
    rows = []
    for n, res in results.items():
        timed, written = res["checkpoints"]["timed"], res["checkpoints"]["written"]
        for k, way in enumerate(("pieces", "rank 0")):
            rows.append({"N": n, "written by": "every rank, its pieces" if k == 0 else
                         "rank 0, the whole state", "save ms": 1e3 * timed[f"{way} save"][
                             "median_s"], "resume ms": 1e3 * timed[f"{way} load"]["median_s"],
                         "busiest rank MB": written[k] / 1e6})
    return rows


def target_ranks(ranks) -> int:
    """The world size the target is judged and the ZeRO-3 step traced at."""
    return TARGET_RANKS if TARGET_RANKS in ranks else min(ranks)


def zero3_target(steps: list[dict], device: str) -> dict | None:
    """ZeRO-3's step over DP's at TARGET_RANKS ranks (or the smallest world timed)."""
    if not steps:
        return None
    n = target_ranks({r["N"] for r in steps})
    ratio = next(r["× DP"] for r in steps if (r["N"], r["contender"]) == (n, "ZeRO-3"))
    return {"ranks": n, "ratio": ratio, "target": TARGET,
            "verdict": judge(device, ratio, at_most=TARGET)}


def fits_rows(fits: dict) -> list[dict]:
    """Per contender, the widest GPT that trained within the budget, and what was tried."""
    return [{"contender": LABELS[name], "d_model": got["d_model"],
             "Ψ (M)": got["params"] / 1e6 if got["params"] else None, "at the cap": got["capped"],
             "tried": " ".join(f"{d}{'✓' if ok else '✗'}" for d, ok in got["tried"])}
            for name, got in fits.items()]


def shape(spec: dict) -> str:
    """A GPT's sizes, as the titles name them."""
    return (f"GPT d_model {spec['d_model']}, {spec['layers']} layers, {spec['heads']} heads, "
            f"V {spec['vocab']}, T {spec['seq']}, batch {spec['batch']}, buckets "
            f"{spec['bucket_kib']} KiB")


def print_tables(record: dict, device: str) -> None:
    """Every part's tables (docs/zero.md, The formula beside the measured bytes, Offload)."""
    cfg, ranks, cores = record["config"], record["ranks"], os.cpu_count() or 1
    for model, mem in record["memory"].items():
        print(table(f"1. bytes per rank ({mem['unit']}), {shape(cfg['models'][model])}, Ψ = "
                    f"{mem['psi']:,}: rank 0's peak per part beside the formula's (f.)",
                    mem["rows"]))
    over = [n for n in ranks if n > cores]
    note = (f"; N = {', '.join(map(str, over))} is oversubscribed ({over[0]} ranks on {cores} "
            "cores): its ratios, not its times, are the figure" if over else "")
    print(table(f"2. step time, {shape(cfg['models']['cli'])}: the slowest rank's median of "
                f"{cfg['repeats']} steps after {cfg['warmup']} warm-up, and rank 0's medians of "
                f"its step's parts, offload's copies apart (ms){note}", record["steps"]))
    target = record["target"]
    print(f"\nZeRO-3 ≤ {TARGET}× DP: {target['verdict']} ({target['ratio']:.2f}×, "
          f"N = {target['ranks']})")
    fit, m = cfg["fits"], cfg["fits"]["model"]
    if record["fits"] is None:
        print(f"\n3. the widest GPT that fits a GPU needs a GPU (--device cuda): skipped on "
              f"{device}")
    else:
        print(table(f"3. the widest GPT each contender trains within {fit['budget_gib']:g} GiB "
                    f"per rank, N = {FIT_RANKS} ranks on {describe(device)}: {m['layers']} "
                    f"layers, T {m['seq']}, batch {m['batch']}; tried: ✓ fits, ✗ out of memory",
                    record["fits"]))
    print(table(f"4. checkpoints of ZeRO-3, {shape(cfg['models']['large'])}, AdamW: saved and "
                "resumed by every rank's pieces, or through rank 0 (the slowest rank's medians)",
                record["checkpoints"], formats={"busiest rank MB": ".3f"}))


def draw(directory: str, record: dict) -> list[str]:
    """The three figures docs/zero.md shows: their paths."""
    from ...trace.timeline_plot import plot_timeline
    from .plot import plot_memory, plot_offload

    out, n, models = Path(directory), target_ranks(record["ranks"]), record["config"]["models"]
    cli, large, mem = models["cli"], models["large"], record["memory"]["large"]
    return [plot_memory(mem, f"GPT d_model {large['d_model']}, {large['layers']} layers, Ψ = "
                             f"{mem['psi']:,}, AdamW float32, buckets {large['bucket_kib']} KiB",
                        str(out / "zero_memory.png")),
            plot_timeline(str(out / TRACE), str(out / "zero3_timeline.png"),
                          title=f"one ZeRO-3 step, N = {n}, GPT d_model {cli['d_model']}, "
                                f"{cli['layers']} layers: compute, collectives, each layer "
                                "gathered (memory)"),
            plot_offload(record["steps"], n, str(out / "zero_offload.png"))]


def measure(args) -> dict:
    cfg = QUICK if args.quick else CONFIG
    ranks = args.ranks
    trace = str(Path(args.figures).resolve() / TRACE) if args.figures else None
    results = {n: job(n, f"{WORKER}:world", {**cfg, "trace": trace if n == target_ranks(ranks)
                                             else None}, args.device) for n in ranks}
    fits = job(FIT_RANKS, f"{WORKER}:fits", {**cfg["fits"], "contenders": list(CONTENDERS)},
               args.device, timeout=FITS_TIMEOUT_S) if args.device == "cuda" else None
    steps = step_rows(results)
    record = {"config": cfg, "ranks": ranks,
              "memory": {model: memory_rows(results, model) for model in cfg["models"]},
              "steps": steps, "target": zero3_target(steps, args.device),
              "checkpoints": checkpoint_rows(results),
              "fits": fits_rows(fits) if fits else None}
    print(f"{headline('zero benchmark', args)}; world sizes {ranks}")
    print_tables(record, args.device)
    return {**record, "figures": draw_figures(args.figures, draw, record, without="; trace only")}


BENCHMARK = Benchmark("ZeRO stages 1-3 and offload: bytes per rank against the formula, step "
                      "time against DP, offload's copies, checkpoints in pieces against rank "
                      "0's", "tiny GPTs, a few steps, N = 2 only",
                      measure, indent=1, ranks=Ranks((2, 4), (2,), more="one job each"),
                      figures="zero_memory.png, zero3_timeline.png with its Chrome trace, and "
                              "zero_offload.png")
