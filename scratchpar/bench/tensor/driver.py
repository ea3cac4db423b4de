"""The tensor benchmark's driver: one MPI job per tp size t, then the tables."""

from __future__ import annotations

import os

from ..harness import Benchmark, describe
from ..mpijob import job, per_world_size
from ..table import table
from .formulas import activation_formula, bytes_formula, korthikanti, param_formula

CONFIG = {"block": {"batch": 4, "seq": 128, "d_model": 256, "heads": 8},
          "mlp": {"tokens": 256, "d_model": 1024}, "warmup": 2, "repeats": 30}
QUICK = {"block": {"batch": 2, "seq": 8, "d_model": 16, "heads": 4},
         "mlp": {"tokens": 8, "d_model": 32}, "warmup": 1, "repeats": 2}
EXPECTED = {  # Megatron's f and g (Shoeybi et al. 2019, §3): g, g forward; f, f backward;
    "tensor": {"all_reduce": 2},  # Korthikanti et al. 2022's g, ḡ each way (§4.2.2)
    "sequence": {"all_gather": 2, "reduce_scatter": 2}}
LAYER_NAMES = {"tensor": "ParallelBlock", "sequence": "SequenceParallelBlock"}
PASSES = ("forward", "backward")
MEGATRON_T2 = 1.64  # Megatron's reported speed-up at t = 2
TIMED_T = 2  # the machine has 2 cores: only t ≤ 2 is real compute


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=lambda s: [int(n) for n in s.split(",")],
                        help="comma-separated tp sizes (default 1,2,4; --quick: 1,2); the MLP "
                             "is timed in the job of 2")


def collective_rows(results: dict, cfg: dict) -> list[dict]:
    """Per t ≥ 2, layer, pass and op: expected and counted (rank 0's trace; every rank's must
    match), the bytes of each, their formula; then the untraced metadata exchanges."""
    rows = []
    for t, res in results.items():
        if t < 2:
            continue
        for layer, expected in EXPECTED.items():
            ranks = [mine[layer] for mine in res["per_rank"]]
            for p in PASSES:
                seen = [rank["collectives"][p] for rank in ranks]
                for op in sorted({*expected, *seen[0]}):
                    each = seen[0].get(op, [])
                    rows.append({"t": t, "layer": LAYER_NAMES[layer], "pass": p, "op": op,
                                 "expected": expected.get(op, 0), "counted": len(each),
                                 "every_rank": all(len(s.get(op, [])) == len(each)
                                                   for s in seen),
                                 "bytes": "/".join(map(str, sorted(set(each)))) or None,
                                 "bytes_formula": bytes_formula(cfg, t, op)})
                calls = [rank["exchanges"][p] for rank in ranks]
                rows.append({"t": t, "layer": LAYER_NAMES[layer], "pass": p,
                             "op": "metadata (allgather_obj, untraced)", "expected": None,
                             "counted": calls[0], "every_rank": len(set(calls)) == 1,
                             "bytes": None, "bytes_formula": None})
    return rows


def timing_rows(results: dict) -> list[dict]:
    """The job of t = 2: both medians, the speed-up beside Megatron's and the ideal t."""
    rows = []
    for t, res in results.items():
        if "mlp" in res:
            timed = res["mlp"]["timed"]
            one, split = timed["alone"]["median_s"], timed["tensor"]["median_s"]
            rows.append({"t": t, "alone_ms": 1e3 * one, "tensor_ms": 1e3 * split,
                         "speedup": one / split, "efficiency": one / split / t,
                         "megatron": MEGATRON_T2, "ideal": float(t),
                         "max_abs_diff": f"{res['mlp']['max_abs_diff']:.1e}"})
    return rows


def memory_rows(results: dict, cfg: dict) -> list[dict]:
    """Per t, layer and rank: what the rank holds beside each formula."""
    rows = []
    for t, res in results.items():
        one = res["one_device"]["activation_bytes"]
        for layer in EXPECTED:
            for r, mine in enumerate(res["per_rank"]):
                held = mine[layer]
                act = activation_formula(cfg, t, r, layer)
                rows.append({"t": t, "layer": layer, "rank": r,
                             "param_bytes": held["param_bytes"],
                             "param_formula": param_formula(cfg, t, r),
                             "grad_bytes": held["grad_bytes"],
                             "activation_bytes": held["activation_bytes"],
                             "activation_formula": act,
                             "activation_ratio": held["activation_bytes"] / act,
                             "korthikanti": round(korthikanti(cfg, t, layer)),
                             "vs_block": held["activation_bytes"] / one})
    return rows


def measure(args) -> dict:
    cfg = QUICK if args.quick else CONFIG
    ranks = args.ranks or ([1, 2] if args.quick else [1, 2, 4])
    results, (before, after) = per_world_size(ranks, lambda t: job(
        t, "scratchpar.bench.tensor.worker", {**cfg, "time": t == TIMED_T}, args.device))
    b, m = cfg["block"], cfg["mlp"]
    collectives = collective_rows(results, b)
    timing, memory = timing_rows(results), memory_rows(results, b)
    one = next(iter(results.values()))["one_device"]
    print(f"tensor benchmark on {describe(args.device)}, {os.cpu_count()} cores, one thread per "
          f"rank; block: B {b['batch']}, T {b['seq']}, C {b['d_model']}, {b['heads']} heads, "
          f"float32, dropout 0; load average (1 min) before {before:.2f}, after {after:.2f}")
    print(table("collectives per transformer layer, counted from the trace (comm events inside "
                "a traced forward and backward region, rank 0's; every rank = same count on "
                "each); bytes = each event's input buffer, formula: 4·B·T·C, all-gather "
                "4·B·T_0·C", collectives,
                {"t": "t", "layer": "layer", "pass": "pass", "op": "op", "expected": "expected",
                 "counted": "counted", "every rank": "every_rank", "bytes": "bytes",
                 "formula": "bytes_formula"}))
    if timing:
        print(table(f"speed-up of the transformer MLP X[{m['tokens']},{m['d_model']}] → "
                    f"{4 * m['d_model']} → {m['d_model']}, forward + backward, median of "
                    f"{cfg['repeats']} after {cfg['warmup']} warm-up, in turns: alone = one "
                    "device on rank 0 (the other asleep); speed-up = alone / tensor; Megatron "
                    f"reports {MEGATRON_T2}× at t=2", timing,
                    {"t": "t", "alone ms": "alone_ms", "tensor ms": "tensor_ms",
                     "speed-up": "speedup", "efficiency": "efficiency",
                     "Megatron": "megatron", "ideal": "ideal",
                     "max |Y − one device's|": "max_abs_diff"}))
    else:
        print(f"\nspeed-up: not timed (the MLP is timed in the job of t = {TIMED_T})")
    print(table(f"held per rank, one block (float32), against the formulas (bench/tensor/"
                f"formulas.py); nn.Block on one device holds {one['param_bytes']} parameter B, "
                f"{one['activation_bytes']} activation B; beside them Korthikanti et al. 2022, "
                "Table 2 (16-bit, what backward reads)", memory,
                {"t": "t", "layer": "layer", "rank": "rank", "param B": "param_bytes",
                 "formula": "param_formula", "grad B": "grad_bytes",
                 "activation B": "activation_bytes", "formula ": "activation_formula",
                 "measured/formula": "activation_ratio", "× nn.Block": "vs_block",
                 "Korthikanti 16-bit B": "korthikanti"}))
    return {"config": cfg, "ranks": ranks, "collectives": collectives, "timing": timing,
            "memory": memory, "one_device": one, "load": [before, after]}


BENCHMARK = Benchmark("tensor (Megatron) parallelism: collectives per layer from the trace, "
                      "speed-up at t = 2, bytes held per rank", "a tiny block and MLP", measure,
                      add_arguments)
