"""The memory benchmark: one MPI job per part (model states, a layer, a pipeline stage, a step),
then the tables."""

from __future__ import annotations

from ...jobs.harness import Benchmark, describe, ints, machine
from ...jobs.mpijob import job
from ...parallel.zero.formula import formula
from ...table import table
from ...train.memory_models import Sizes, gpt_layer, korthikanti
from ..zero.driver import LABELS, SHORT, KiB, MiB
from .worker import MODES

STATES = {"vocab": 32, "seq": 64, "d_model": 256, "heads": 4, "layers": 4, "batch": 8,
          "grad_clip": 1.0, "steps": 2, "bucket_kib": 1024}
LAYER_SIZES = [{"batch": 8, "seq": 64, "d_model": 64, "heads": 4},
               {"batch": 4, "seq": 256, "d_model": 128, "heads": 8},
               {"batch": 2, "seq": 512, "d_model": 256, "heads": 8}]
STEP_SIZES = [{"vocab": 32, "seq": 64, "d_model": 64, "heads": 4, "layers": 2, "batch": 32},
              {"vocab": 32, "seq": 256, "d_model": 64, "heads": 4, "layers": 2, "batch": 8}]
STASH = {"size": {"vocab": 32, "seq": 64, "d_model": 64, "heads": 4, "layers": 4},
         "rows": 4, "micro": [2, 8]}  # a GPipe stage: rows per micro-batch, m from and to
CONFIG = {"states": STATES, "layers": LAYER_SIZES, "stash": STASH, "steps": STEP_SIZES,
          "dropout": 0.1, "warmup": 2, "repeats": 10}
QUICK = {"states": {**STATES, "seq": 16, "d_model": 32, "layers": 2, "batch": 4, "steps": 1,
                    "bucket_kib": 16},
         "layers": [{"batch": 2, "seq": 8, "d_model": 16, "heads": 4}],
         "stash": {"size": {**STASH["size"], "seq": 16, "d_model": 32, "layers": 2}, "rows": 2,
                   "micro": [2, 4]},
         "steps": [{**STEP_SIZES[0], "seq": 16, "d_model": 16, "batch": 4}], "dropout": 0.1,
         "warmup": 1, "repeats": 2}
PRECISIONS = {"fp32": 4, "fp16": 2, "bf16": 2}  # bytes a value
PARTS = ("parameters", "gradients", "optimizer")
STRATEGIES = ("dp", "zero1", "zero2", "zero3")


def precisions(device: str) -> list[str]:
    """The 16-bit formats the device has: CuPy has no bfloat16."""
    return list(PRECISIONS) if device == "cpu" else ["fp32", "fp16"]


def engine(seq: int, batch: int, d_model: int, heads: int, t: int, itemsize: int,
           recompute: str, sequence_parallel: bool) -> float:
    """:func:`korthikanti`'s layer as this engine's graph keeps it (``memory_models.gpt_layer``:
    fp32 rstd, dropout on), with the causal mask (s² bools) where the attention core is kept."""
    sizes = Sizes.even(batch, seq, d_model, heads, t, sequence_parallel)
    return gpt_layer(sizes, itemsize, 4, True, recompute) + seq * seq * (recompute == "none")


def state_rows(results: dict) -> list[dict]:
    """Per world size, precision and strategy, rank 0's peaks (its chunks are the larger) of
    the parts ZeRO's formula names, beside the formula (Rajbhandari et al. 2020, §5)."""
    rows = []
    for n, res in results.items():
        for precision, mem in res.items():
            for name, held in mem["held"].items():
                peak = held["peak"]
                k = 8 if precision == "fp32" else 12  # Adam's moments, and the fp32 master
                want = formula(STRATEGIES.index(name), mem["psi"], n, PRECISIONS[precision], k)
                row = {"ranks": n, "precision": precision, "strategy": LABELS[name],
                       **{p: peak.get(p, 0) / MiB for p in PARTS},
                       **{f"f_{p}": want[p] / MiB for p in PARTS}}
                row["ratio"] = sum(row[p] for p in PARTS) / sum(row[f"f_{p}"] for p in PARTS)
                row["per_param"] = sum(want.values()) / mem["psi"]
                rows.append(row)
    return rows


def layer_rows(results: dict, cfg: dict, device: str) -> list[dict]:
    """Per layer size, t, layer and precision, the busiest rank's bytes under each
    recomputation beside Korthikanti et al.'s (:func:`korthikanti`), and their ratio to this
    engine's count of the same arrays (:func:`engine`)."""
    rows = []
    for i, size in enumerate(cfg["layers"]):
        s, b, h, a = size["seq"], size["batch"], size["d_model"], size["heads"]
        for t, res in results.items():
            for layer in ("block",) if t == 1 else ("tensor", "sequence"):
                for precision in precisions(device):
                    row = {"size": f"s {s} b {b} h {h} a {a}", "t": t, "layer": layer,
                           "precision": precision}
                    for mode in MODES:
                        got = max(r[f"{i} {layer} {precision} {mode}"] for r in res["ranks"])
                        args = (s, b, h, a, t, PRECISIONS[precision], mode,
                                layer == "sequence")
                        row |= {mode: got / KiB, f"f_{mode}": korthikanti(*args) / KiB,
                                f"r_{mode}": got / engine(*args)}
                    row["saved"] = 1 - row["selective"] / row["none"]
                    rows.append(row)
    return rows


def stash_rows(result: dict | None, cfg: dict) -> list[dict]:
    """Per stage and recomputation, the bytes a GPipe stage keeps per micro-batch in flight
    (the slope of its step's peak in m) beside Korthikanti et al.'s count for its blocks: each
    block's activations (this engine's arrays, :func:`engine`), or under full recomputation
    its boundary input alone (GPipe's re-materialization, Huang et al. 2019, §2.1); and the
    boundary activations the runtime held, per micro-batch."""
    if result is None:
        return []
    st, (lo, hi) = cfg["stash"], cfg["stash"]["micro"]
    size, rows = st["size"], st["rows"]
    shape = (size["seq"], rows, size["d_model"], size["heads"], 1, PRECISIONS["fp32"])
    out = []
    for stage, mine in enumerate(result["ranks"]):
        for mode in MODES:
            low, high = mine[f"{mode} {lo}"], mine[f"{mode} {hi}"]
            per = (high["peak"] - low["peak"]) / (hi - lo)
            want = (korthikanti(*shape, "full", False) if mode == "full"
                    else high["blocks"] * engine(*shape, mode, False))
            out.append({"stage": stage, "blocks": high["blocks"], "recompute": mode,
                        "per": per / KiB, "formula": want / KiB, "ratio": per / want,
                        "boundary": (high["boundary"] - low["boundary"]) / (hi - lo) / KiB})
    return out


def step_rows(result: dict, cfg: dict, cases: list) -> list[dict]:
    """Per step size and case, the median and peak beside fp32 without recomputation's."""
    rows = []
    for i, size in enumerate(cfg["steps"]):
        base = result[f"{i} fp32 none"]
        for precision, mode in cases:
            got = result[f"{i} {precision} {mode}"]
            rows.append({"size": f"T {size['seq']} B {size['batch']} C {size['d_model']}",
                         "precision": precision, "recompute": mode,
                         "ms": 1e3 * got["median_s"], "time": got["median_s"] / base["median_s"],
                         "peak": got["peak_bytes"] / MiB,
                         "peak_ratio": got["peak_bytes"] / base["peak_bytes"]})
    return rows


def measure(args) -> dict:
    cfg = {**(QUICK if args.quick else CONFIG), "precisions": precisions(args.device)}
    drop = {"dropout": cfg["dropout"]}
    ranks = args.ranks or ([1, 2] if args.quick else [1, 2, 4])
    models = {p: {**cfg["states"], "precision": p} for p in ("fp32", "fp16")}
    states = {n: job(n, "scratchpar.bench.zero.worker:memory",
                     {"models": models, "contenders": STRATEGIES}, args.device)
              for n in ranks if n > 1}
    layers = {t: job(t, "scratchpar.bench.memory.worker:activations",
                     {"sizes": [{**s, **drop} for s in cfg["layers"]],
                      "precisions": cfg["precisions"]}, args.device) for t in ranks}
    stash = job(2, "scratchpar.bench.memory.worker:stash",
                {**cfg["stash"], "size": {**cfg["stash"]["size"], **drop}}, args.device) \
        if 2 in ranks else None
    cases = [("fp32", m) for m in MODES] + [(p, "none") for p in cfg["precisions"][1:]]
    steps = job(1, "scratchpar.bench.memory.worker:steps",
                {**cfg, "sizes": [{**s, **drop} for s in cfg["steps"]], "cases": cases},
                args.device)
    rows = {"states": state_rows(states), "layers": layer_rows(layers, cfg, args.device),
            "stash": stash_rows(stash, cfg), "steps": step_rows(steps, cfg, cases)}
    print(f"memory benchmark on {describe(args.device)}, {machine(args)}")
    st = cfg["states"]
    print(table(f"model states per rank (rank 0, MiB), the ledger's peaks beside ZeRO's formula "
                f"(GPT C {st['d_model']}, {st['layers']} layers, AdamW; mixed: 16-bit weights "
                "and gradients, fp32 masters and moments)", rows["states"],
                {"N": "ranks", "precision": "precision", "strategy": "strategy",
                 **{SHORT[p]: p for p in PARTS}, **{f"f.{SHORT[p]}": f"f_{p}" for p in PARTS},
                 "measured/formula": "ratio", "formula B/param": "per_param"}))
    print(table(f"one transformer layer's activations per rank (KiB, the busiest rank), the "
                f"graph's bytes beside Korthikanti et al. 2022's (K.) and over this engine's "
                f"count of the same arrays (dropout {cfg['dropout']}; bf16's as fp16's)",
                rows["layers"],
                {**{key: key for key in ("size", "t", "layer", "precision")},
                 **{h: key for mode in MODES for h, key in (
                     (mode, mode), (f"K. {mode}", f"f_{mode}"), (f"÷ engine {mode}", f"r_{mode}"))},
                 "selective saves": "{saved:.0%}"}))
    if rows["stash"]:
        sz = cfg["stash"]["size"]
        print(table(f"a GPipe stage's bytes per micro-batch in flight (KiB; 2 stages, GPT C "
                    f"{sz['d_model']}, T {sz['seq']}, {sz['layers']} blocks, "
                    f"{cfg['stash']['rows']} rows a micro-batch, dropout {cfg['dropout']}, "
                    f"fp32): the slope of the step's peak from m = {cfg['stash']['micro'][0]} "
                    f"to {cfg['stash']['micro'][1]}, beside its blocks' activations, or the "
                    "boundary input alone under full", rows["stash"],
                    {**{key: key for key in ("stage", "blocks", "recompute")},
                     "per micro-batch": "per", "formula": "formula",
                     "measured/formula": "ratio", "boundary held": "boundary"}))
    print(table(f"a step of one device's GPT (dropout {cfg['dropout']}), median of "
                f"{cfg['repeats']} in turns, and its peak (MiB)", rows["steps"],
                {**{key: key for key in ("size", "precision", "recompute", "ms")},
                 "× fp32 none": "time", "peak": "peak", "× peak": "peak_ratio"}))
    return {"config": cfg, "ranks": ranks, **rows}


BENCHMARK = Benchmark("mixed precision and recomputation: model states, a layer's "
                      "activations and a GPipe stage's per micro-batch beside ZeRO's and "
                      "Korthikanti et al.'s formulas, and recomputation's time", "tiny models",
                      measure,
                      lambda parser: parser.add_argument(
                          "--ranks", type=ints, help="comma-separated world sizes (default "
                          "1,2,4; --quick: 1,2): ZeRO's N and the layer's t"))
