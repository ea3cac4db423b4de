"""Measure tensor (Megatron) parallelism: collectives per layer, speed-up, bytes held per rank.

One MPI job per tp size t (default 1, 2, 4; 4 ranks oversubscribe the 2 cores, which counts of
messages and bytes do not mind) measures three things:

1. Collectives per transformer layer, counted from the trace: one forward and one backward of a
   ParallelBlock and a SequenceParallelBlock, each pass a traced region, the comm events inside
   counted by op, against Megatron's 2 all-reduces each way (f and g, Shoeybi et al. 2019, §3)
   and Korthikanti et al. 2022's 2 all-gathers and 2 reduce-scatters each way (g, ḡ, §4.2.2).
   Metadata exchanges (pickled ``allgather_obj``, not traced) are counted apart.
2. Speed-up at t = 2 of a compute-bound transformer MLP X[N,C] → 4C → C, forward and backward:
   one device (rank 0 alone) against ``ParallelFeedForward`` over 2 ranks, in turns in the same job.
   Megatron reports 1.64× at t = 2.
3. Parameter, gradient and activation bytes per rank of one block (float32, 4 B), each against
   its formula; with s = T, b = B, h = C, a = H heads, and t dividing a, 4h and s:

   parameters = 4 · (6h + (12h² + 7h)/t): replicated γ, β of 2 LayerNorms (4h) and the biases
       of the 2 row-parallel layers (2h); split QKV (3h² + 3h), projection (h²), W₁ (4h² + 4h)
       and W₂ (4h²). Gradients: the same bytes (a PARTIAL gradient is whole-shaped).
   activations = 4 · (sbh · (13 + 17/t) + 4·as²b/t + 2sb) + s² without SP,
                 4 · (sbh · (4 + 28/t) + 4·as²b/t + 2sb/t) + s² with SP,
       the distinct buffers one forward's graph keeps (``held.graph_bytes``, the input included).
       This engine keeps every op's output while its graph lives (``ctx.parents``), not only
       what backward reads. Whole (sbh each, or sbh/t with SP): the input; each LayerNorm's
       x̂ and output (2, and rstd: sb); each row-parallel layer's partial product, its sum (a
       copy) and the bias added (3; with SP the partial product stays whole, the other two
       are shards); the 2 residual sums. Split (sbh/t): QKV (3), attention·V and its reshaped
       copy (2; a view, no copy, where a rank holds one head), W₁'s output, GELU's σ and its
       output (12). Scores (b, a/t, s, s): QKᵀ, scaled, masked, softmax (4). With SP, the
       all-gathered inputs of QKV and W₁ are kept whole (2 sbh). The causal mask: s² bool
       bytes. Without tp (``nn.Block``): 26 sbh + 4as²b + 2sb, + s².
   Korthikanti et al. 2022, Table 2 (bytes, 16-bit, dropout masks 1 B, backward's needs only):
   sbh · (10 + 24/t) + 5as²b/t without SP, sbh · 34/t + 5as²b/t with SP. The difference here:
   outputs that no backward reads stay on the graph (partial sums, the copies after each sum,
   the scores before softmax), and with SP the gathered inputs are kept rather than gathered
   again in backward (their §4.2.2).
   Uneven splits (``chunks.counts``) are counted per rank.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..comm.chunks import counts
from .device import add_argument as add_device_argument
from .device import describe
from .mpijob import JobFailed, per_world_size, run_module
from .table import table

CONFIG = {"block": {"batch": 4, "seq": 128, "d_model": 256, "heads": 8},
          "mlp": {"tokens": 256, "d_model": 1024}, "warmup": 2, "repeats": 30}
QUICK = {"block": {"batch": 2, "seq": 8, "d_model": 16, "heads": 4},
         "mlp": {"tokens": 8, "d_model": 32}, "warmup": 1, "repeats": 2}
EXPECTED = {"tensor": {"all_reduce": 2},  # each way: g, g forward; f, f backward
            "sequence": {"all_gather": 2, "reduce_scatter": 2}}  # g, ḡ each way
LAYER_NAMES = {"tensor": "ParallelBlock", "sequence": "SequenceParallelBlock"}
PASSES = ("forward", "backward")
MEGATRON_T2 = 1.64  # Megatron's reported speed-up at t = 2
TIMED_T = 2  # the machine has 2 cores: only t ≤ 2 is real compute
FLOAT32 = 4
JOB_TIMEOUT_S = 300


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", type=lambda s: [int(n) for n in s.split(",")],
                        help="comma-separated tp sizes (default 1,2,4; --quick: 1,2); the MLP "
                             "is timed in the job of 2")
    parser.add_argument("--quick", action="store_true", help="a tiny block and MLP (smoke test)")
    parser.add_argument("--json", metavar="PATH", help="also write every number to this file")
    add_device_argument(parser)


def shares(cfg: dict, t: int, r: int) -> tuple[int, int, int]:
    """Rank r's heads h_r, hidden units f_r of 4C, and tokens T_r of the sequence."""
    return (counts(cfg["heads"], t)[r], counts(4 * cfg["d_model"], t)[r],
            counts(cfg["seq"], t)[r])


def param_formula(cfg: dict, t: int, r: int) -> int:
    """Bytes of rank r's shard of one block: 6C replicated; its slices of QKV (C·3q + 3q),
    the projection (q·C), W₁ (C·f + f) and W₂ (f·C), q = h_r·d, f = f_r."""
    c = cfg["d_model"]
    heads, f, _ = shares(cfg, t, r)
    q = heads * (c // cfg["heads"])
    return FLOAT32 * (6 * c + (c * 3 * q + 3 * q) + q * c + (c * f + f) + f * c)


def activation_formula(cfg: dict, t: int, r: int, layer: str) -> int:
    """Bytes the forward's graph keeps on rank r (the module docstring's count, per rank)."""
    b, s, c = cfg["batch"], cfg["seq"], cfg["d_model"]
    heads, f, s_r = shares(cfg, t, r)
    n, q = b * s, heads * (c // cfg["heads"])  # tokens, h_r·d
    copied = heads > 1 and s > 1  # attn·V (B, T, h_r, d) joins its heads by a copy
    split = n * ((4 + copied) * q + 3 * f) + 4 * b * heads * s * s  # QKV, attn·V, W₁ ×3; scores
    if layer == "tensor":
        whole = 13 * n * c + 2 * n
    else:  # 11 shards of (B, T_r, C), the 2 gathered inputs and 2 partial products whole
        whole = 11 * b * s_r * c + 4 * n * c + 2 * b * s_r
    return FLOAT32 * (whole + split) + s * s  # + the (T, T) bool causal mask


def korthikanti(cfg: dict, t: int, layer: str) -> float:
    """Korthikanti et al. 2022, Table 2: a layer's activation bytes per rank in their 16-bit
    accounting, sbh · (10 + 24/t) + 5as²b/t, or with SP sbh · 34/t + 5as²b/t."""
    s, b, h, a = cfg["seq"], cfg["batch"], cfg["d_model"], cfg["heads"]
    whole = 34 / t if layer == "sequence" else 10 + 24 / t
    return s * b * h * whole + 5 * a * s * s * b / t


def bytes_formula(cfg: dict, t: int, op: str) -> int:
    """Bytes the tracer records for one collective on rank 0: its input buffer, the whole
    (B, T, C) for an all-reduce or a reduce-scatter, rank 0's (B, T_0, C) for an all-gather."""
    rows = counts(cfg["seq"], t)[0] if op == "all_gather" else cfg["seq"]
    return FLOAT32 * cfg["batch"] * rows * cfg["d_model"]


def job(n: int, cfg: dict, tmp: Path, device: str) -> dict:
    print(f"tensor: t = {n}", file=sys.stderr, flush=True)
    out = tmp / f"tensor-n{n}.json"
    run_module(n, "scratchpar.bench.tensor_worker",
               ["--config", json.dumps({**cfg, "time": n == TIMED_T}), "--device", device,
                "--out", str(out)], JOB_TIMEOUT_S, {})
    return json.loads(out.read_text())


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


def run(args) -> int:
    cfg = QUICK if args.quick else CONFIG
    ranks = args.ranks or ([1, 2] if args.quick else [1, 2, 4])
    try:
        results, (before, after) = per_world_size(
            ranks, lambda n, tmp: job(n, cfg, tmp, args.device))
    except JobFailed as failure:
        print(f"tensor: {failure}", file=sys.stderr)
        return 1
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
                    "reports 1.64× at t=2", timing,
                    {"t": "t", "alone ms": "alone_ms", "tensor ms": "tensor_ms",
                     "speed-up": "speedup", "efficiency": "efficiency",
                     "Megatron": "megatron", "ideal": "ideal",
                     "max |Y − one device's|": "max_abs_diff"}))
    else:
        print(f"\nspeed-up: not timed (the MLP is timed in the job of t = {TIMED_T})")
    print(table(f"held per rank, one block (float32), against the formulas (module "
                f"docstring); nn.Block on one device holds {one['param_bytes']} parameter B, "
                f"{one['activation_bytes']} activation B; beside them Korthikanti et al. 2022, "
                "Table 2 (16-bit, what backward reads)", memory,
                {"t": "t", "layer": "layer", "rank": "rank", "param B": "param_bytes",
                 "formula": "param_formula", "grad B": "grad_bytes",
                 "activation B": "activation_bytes", "formula ": "activation_formula",
                 "measured/formula": "activation_ratio", "× nn.Block": "vs_block",
                 "Korthikanti 16-bit B": "korthikanti"}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": describe(args.device), "quick": args.quick, "config": cfg,
                       "ranks": ranks, "collectives": collectives, "timing": timing,
                       "memory": memory, "one_device": one, "load": [before, after]}, f,
                      indent=2)
    return 0
