"""The memory benchmark: mixed precision and recomputation per rank, beside their formulas."""

from __future__ import annotations

from ...jobs.harness import Benchmark, Ranks, headline
from ...jobs.mpijob import job
from ...table import printed
from ...train.memory_context import causal_mask
from ...train.memory_models import KiB, MiB, Sizes, gpt_layer, korthikanti
from ..zero.driver import states
from .worker import MODES

DROPOUT = 0.1  # of every layer and GPT measured here but the model states'
GPT = {"vocab": 32, "seq": 64, "d_model": 64, "heads": 4, "layers": 2, "dropout": DROPOUT}
LAYER = {"batch": 8, "seq": 64, "d_model": 64, "heads": 4, "dropout": DROPOUT}
CONFIG = {"states": {**GPT, "d_model": 256, "layers": 4, "dropout": 0.0, "batch": 8,
                     "grad_clip": 1.0, "steps": 2, "bucket_kib": 1024},
          "layers": [LAYER, {**LAYER, "batch": 4, "seq": 256, "d_model": 128, "heads": 8},
                     {**LAYER, "batch": 2, "seq": 512, "d_model": 256, "heads": 8}],
          "stash": {"size": {**GPT, "layers": 4}, "rows": 4, "micro": [2, 8]},  # m from and to
          "steps": [{**GPT, "batch": 32}, {**GPT, "seq": 256, "batch": 8}],
          "warmup": 2, "repeats": 10}
QUICK = {"states": {**CONFIG["states"], "seq": 16, "d_model": 32, "layers": 2, "batch": 4,
                    "steps": 1, "bucket_kib": 16},
         "layers": [{**LAYER, "batch": 2, "seq": 8, "d_model": 16}],
         "stash": {"size": {**GPT, "seq": 16, "d_model": 32}, "rows": 2, "micro": [2, 4]},
         "steps": [{**GPT, "seq": 16, "d_model": 16, "batch": 4}], "warmup": 1, "repeats": 2}
PRECISIONS = {"fp32": 4, "fp16": 2, "bf16": 2}  # bytes a value
STRATEGIES = ("dp", "zero1", "zero2", "zero3")
WORKER = "scratchpar.bench.memory.worker"


def engine(seq: int, batch: int, d_model: int, heads: int, t: int, itemsize: int,
           recompute: str, sequence_parallel: bool) -> float:
    """:func:`korthikanti`'s layer as this engine's graph keeps it (``memory_models.gpt_layer``),
    with the causal mask (``causal_mask``, s² bools) where the attention core is kept."""
    sizes = Sizes.even(batch, seq, d_model, heads, t, sequence_parallel)
    return gpt_layer(sizes, itemsize, 4, True, recompute) + causal_mask(seq) * (recompute == "none")


def state_rows(results: dict) -> list[dict]:
    """Per world size, precision and strategy, rank 0's model states beside ZeRO's formula in
    MiB (:func:`~scratchpar.bench.zero.driver.states`), and the formula's bytes a parameter."""
    rows = []
    for n, res in results.items():
        for precision, mem in res.items():
            k = 8 if precision == "fp32" else 12  # Adam's moments, and the fp32 master
            for name, held in mem["held"].items():
                row = states(n, name, held["peak"], mem["psi"], PRECISIONS[precision], k, MiB)
                want = sum(v for key, v in row.items() if key.startswith("f.")) * MiB
                rows.append({"precision": precision, **row, "formula B/param": want / mem["psi"]})
    return rows


def layer_rows(results: dict, cfg: dict) -> list[dict]:
    """Per layer size, t, layer and precision, the busiest rank's KiB under each recomputation
    beside Korthikanti et al.'s (K.), and over this engine's count of the same arrays."""
    rows = []
    for i, size in enumerate(cfg["layers"]):
        s, b, h, a = size["seq"], size["batch"], size["d_model"], size["heads"]
        for t, res in results.items():
            for layer in ("block",) if t == 1 else ("tensor", "sequence"):
                for precision in cfg["precisions"]:
                    row = {"size": f"s {s} b {b} h {h} a {a}", "t": t, "layer": layer,
                           "precision": precision}
                    for mode in MODES:
                        got = max(r[f"{i} {layer} {precision} {mode}"] for r in res["ranks"])
                        args = (s, b, h, a, t, PRECISIONS[precision], mode, layer == "sequence")
                        row |= {mode: got / KiB, f"K. {mode}": korthikanti(*args) / KiB,
                                f"÷ engine {mode}": got / engine(*args)}
                    rows.append({**row, "selective saves":
                                 f"{1 - row['selective'] / row['none']:.0%}"})
    return rows


def stash_rows(result: dict, cfg: dict) -> list[dict]:
    """Per stage and recomputation, the slope in m of a GPipe stage's peak (KiB per micro-batch)
    beside its blocks' :func:`engine`, or its input alone under full (Huang et al. 2019, §2.1)."""
    size, (lo, hi) = cfg["stash"]["size"], cfg["stash"]["micro"]
    shape = (size["seq"], cfg["stash"]["rows"], size["d_model"], size["heads"], 1, 4)  # fp32
    rows = []
    for stage, mine in enumerate(result["ranks"]):
        for mode in MODES:
            low, high = mine[f"{mode} {lo}"], mine[f"{mode} {hi}"]
            per = (high["peak"] - low["peak"]) / (hi - lo)
            want = (korthikanti(*shape, "full", False) if mode == "full"
                    else high["blocks"] * engine(*shape, mode, False))
            rows.append({"stage": stage, "blocks": high["blocks"], "recompute": mode,
                         "per micro-batch": per / KiB, "formula": want / KiB,
                         "measured/formula": per / want,
                         "boundary held": (high["boundary"] - low["boundary"]) / (hi - lo) / KiB})
    return rows


def step_rows(result: dict, cfg: dict) -> list[dict]:
    """Per step size and case, the median and peak beside fp32 without recomputation's."""
    rows = []
    for i, size in enumerate(cfg["steps"]):
        base = result[f"{i} fp32 none"]
        for precision, mode in cfg["cases"]:
            got = result[f"{i} {precision} {mode}"]
            rows.append({"size": f"T {size['seq']} B {size['batch']} C {size['d_model']}",
                         "precision": precision, "recompute": mode, "ms": 1e3 * got["median_s"],
                         "× fp32 none": got["median_s"] / base["median_s"],
                         "peak": got["peak_bytes"] / MiB,
                         "× peak": got["peak_bytes"] / base["peak_bytes"]})
    return rows


def measure(args) -> dict:
    formats = list(PRECISIONS) if args.device == "cpu" else ["fp32", "fp16"]  # CuPy: no bf16
    cfg = {**(QUICK if args.quick else CONFIG), "precisions": formats,  # a step's cases below
           "cases": [("fp32", m) for m in MODES] + [(p, "none") for p in formats[1:]]}
    ranks, st, sz = args.ranks, cfg["states"], cfg["stash"]["size"]
    models = {p: {**st, "precision": p} for p in ("fp32", "fp16")}
    held = {n: job(n, "scratchpar.bench.zero.worker:memory",
                   {"models": models, "contenders": STRATEGIES}, args.device)
            for n in ranks if n > 1}
    layers = {t: job(t, f"{WORKER}:activations", cfg, args.device) for t in ranks}
    stash = job(2, f"{WORKER}:stash", cfg, args.device) if 2 in ranks else None
    steps = job(1, f"{WORKER}:steps", cfg, args.device)
    print(headline("memory benchmark", args))
    return {"config": cfg, "ranks": ranks, **printed({  # the JSON's key: (title, rows)
        "states": (f"model states per rank (rank 0, MiB) beside ZeRO's formula (GPT C "
                   f"{st['d_model']}, {st['layers']} layers, AdamW; mixed: fp32 masters)",
                   state_rows(held)),
        "layers": (f"one layer's activations per rank (KiB, the busiest rank) beside Korthikanti "
                   f"et al. 2022's (K.) and this engine's count (dropout {DROPOUT})",
                   layer_rows(layers, cfg)),
        "stash": (f"a GPipe stage's KiB per micro-batch in flight (2 stages, GPT C "
                  f"{sz['d_model']}, T {sz['seq']}, {sz['layers']} blocks, fp32): the slope of "
                  f"its peak over m = {'..'.join(map(str, cfg['stash']['micro']))}",
                  stash_rows(stash, cfg) if stash else []),
        "steps": (f"one device's GPT step (dropout {DROPOUT}), median of {cfg['repeats']} in "
                  "turns, and its peak (MiB)", step_rows(steps, cfg))})}


BENCHMARK = Benchmark("mixed precision and recomputation: model states, a layer's "
                      "activations and a GPipe stage's per micro-batch beside ZeRO's and "
                      "Korthikanti et al.'s formulas, and recomputation's time", "tiny models",
                      measure, ranks=Ranks((1, 2, 4), (1, 2), more="ZeRO's N and the layer's t"))
