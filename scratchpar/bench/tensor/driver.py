"""The tensor benchmark: one MPI job per tp size t, then the tables."""

from __future__ import annotations

import numpy as np

from ...comm.chunks import counts
from ...nn import Block
from ...parallel import Hybrid
from ...parallel.description import Shape
from ..harness import Benchmark, describe, ints, machine
from ..mpijob import job, per_world_size
from ..table import table
from .formulas import FLOAT32, activation_formula, korthikanti, param_formula

CONFIG = {"block": {"batch": 4, "seq": 128, "d_model": 256, "heads": 8},
          "mlp": {"tokens": 256, "d_model": 1024}, "warmup": 2, "repeats": 30}
QUICK = {"block": {"batch": 2, "seq": 8, "d_model": 16, "heads": 4},
         "mlp": {"tokens": 8, "d_model": 32}, "warmup": 1, "repeats": 2}
LAYER_NAMES = {"tensor": "ParallelBlock", "sequence": "SequenceParallelBlock"}
PASSES = ("forward", "backward")
MEGATRON_T2 = 1.64  # Megatron's reported speed-up at t = 2
TIMED_T = 2  # the machine has 2 cores: only t ≤ 2 is real compute


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=ints,
                        help="comma-separated tp sizes (default 1,2,4; --quick: 1,2); the MLP "
                             "is timed in the job of 2")


def expected(cfg: dict, t: int, layer: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(pass, op) → (count, bytes the tracer records for each: the collective's input, rank 0's
    sequence chunk for an all-gather) of one block on a tp group of t, from the description
    (Megatron's f and g, Shoeybi et al. 2019, §3; with sequence parallelism Korthikanti et al.
    2022's g and ḡ each way, §4.2.2)."""
    block = Block(cfg["d_model"], cfg["heads"], np.random.default_rng(0))
    shape = Shape.of(block, FLOAT32, 0, boundary=FLOAT32 * cfg["seq"] * cfg["d_model"])
    sends = Hybrid.describe(shape, t, tp=t, rows=cfg["batch"],
                            sequence_parallel=layer == "sequence").sends
    chunk = counts(cfg["seq"], t)[0] / cfg["seq"]
    return {(m.behind, m.op.replace("-", "_")): (
        m.count, round(m.nbytes * chunk) if m.op == "all-gather" else m.nbytes)
        for m in sends if m.axis == "tp"}


def collective_rows(results: dict, cfg: dict) -> list[dict]:
    """Per t ≥ 2, layer, pass and op: described and counted (rank 0's trace; every rank's must
    match), and the bytes of each; then the untraced metadata exchanges."""
    rows = []
    for t, res in results.items():
        for layer in LAYER_NAMES if t >= 2 else ():
            ranks, want = [mine[layer] for mine in res["per_rank"]], expected(cfg, t, layer)
            for p in PASSES:
                seen = [rank["collectives"][p] for rank in ranks]
                for op in sorted({op for phase, op in want if phase == p} | set(seen[0])):
                    each, (count, nbytes) = seen[0].get(op, []), want.get((p, op), (0, None))
                    rows.append({"t": t, "layer": LAYER_NAMES[layer], "pass": p, "op": op,
                                 "expected": count, "counted": len(each),
                                 "every_rank": all(len(s.get(op, [])) == len(each)
                                                   for s in seen),
                                 "bytes": "/".join(map(str, sorted(set(each)))) or None,
                                 "bytes_formula": nbytes})
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
        for layer in LAYER_NAMES:
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
    results, load = per_world_size(ranks, lambda t: job(
        t, "scratchpar.bench.tensor.worker:measure", {**cfg, "time": t == TIMED_T}, args.device))
    b, m = cfg["block"], cfg["mlp"]
    collectives = collective_rows(results, b)
    timing, memory = timing_rows(results), memory_rows(results, b)
    one = next(iter(results.values()))["one_device"]
    print(f"tensor benchmark on {describe(args.device)}, {machine(load)}; block: B {b['batch']}, "
          f"T {b['seq']}, C {b['d_model']}, {b['heads']} heads, float32, dropout 0")
    print(table("collectives per transformer layer, counted from the trace beside the "
                "description (docs/tensor_parallel.md, Measurements)", collectives,
                {"t": "t", "layer": "layer", "pass": "pass", "op": "op", "expected": "expected",
                 "counted": "counted", "every rank": "every_rank", "bytes": "bytes",
                 "formula": "bytes_formula"}))
    if timing:
        print(table(f"speed-up of the transformer MLP X[{m['tokens']},{m['d_model']}] → "
                    f"{4 * m['d_model']} → {m['d_model']} against one device, median of "
                    f"{cfg['repeats']} after {cfg['warmup']} warm-up", timing,
                    {"t": "t", "alone ms": "alone_ms", "tensor ms": "tensor_ms",
                     "speed-up": "speedup", "efficiency": "efficiency",
                     "Megatron": "megatron", "ideal": "ideal",
                     "max |Y − one device's|": "max_abs_diff"}))
    else:
        print(f"\nspeed-up: not timed (the MLP is timed in the job of t = {TIMED_T})")
    print(table(f"held per rank, one block, against the formulas; nn.Block holds "
                f"{one['param_bytes']} parameter B, {one['activation_bytes']} activation B",
                memory,
                {"t": "t", "layer": "layer", "rank": "rank", "param B": "param_bytes",
                 "formula": "param_formula", "grad B": "grad_bytes",
                 "activation B": "activation_bytes", "formula ": "activation_formula",
                 "measured/formula": "activation_ratio", "× nn.Block": "vs_block",
                 "Korthikanti 16-bit B": "korthikanti"}))
    return {"config": cfg, "ranks": ranks, "collectives": collectives, "timing": timing,
            "memory": memory, "one_device": one, "load": list(load)}


BENCHMARK = Benchmark("tensor (Megatron) parallelism: collectives per layer from the trace, "
                      "speed-up at t = 2, bytes held per rank", "a tiny block and MLP", measure,
                      add_arguments)
