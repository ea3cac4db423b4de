"""The tensor benchmark: per tp size t, a block's collectives and bytes, and an MLP's speed-up."""

from __future__ import annotations

import copy

import numpy as np

from ... import backend
from ...autograd import Tensor
from ...autograd.held import graph_bytes
from ...comm.chunks import bounds, counts
from ...jobs.harness import Benchmark, Ranks, headline
from ...jobs.mpijob import job
from ...nn import GELU, Block, Dropout, Linear, Sequential
from ...parallel import Hybrid
from ...parallel.description import Shape
from ...parallel.tensor import ParallelFeedForward
from ...parallel.tensor.block import ParallelBlock, SequenceParallelBlock
from ...table import printed
from ...trace.tracer import Tracer
from ...train.memory_context import causal_mask
from ...train.memory_models import Sizes, gpt_layer
from ...train.memory_parameters import gpt_block
from ..timing import against_one_device, speedup

CONFIG = {"block": {"batch": 4, "seq": 128, "d_model": 256, "heads": 8},
          "mlp": {"tokens": 256, "d_model": 1024}, "warmup": 2, "repeats": 30}
QUICK = {"block": {"batch": 2, "seq": 8, "d_model": 16, "heads": 4},
         "mlp": {"tokens": 8, "d_model": 32}, "warmup": 1, "repeats": 2}
LAYERS = {"tensor": ParallelBlock, "sequence": SequenceParallelBlock}
FLOAT32 = 4
METADATA = "metadata (allgather_obj, untraced)"  # pickled exchanges, which the tracer skips
MEGATRON_T2 = 1.64  # Megatron's reported speed-up at t = 2
TIMED_T = 2  # the machine has 2 cores: only t ≤ 2 is real compute


def host_input(shape: tuple, seed: int):
    """The same float32 array on every rank (host)."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def traced(comm, run) -> tuple:
    """``run()``'s result, and its collectives: each op (the name before the algorithm) → the
    bytes of each call, and METADATA → the name of each ``comm.allgather_obj`` call."""
    tracer, calls, inner = Tracer(comm.rank), [], comm.allgather_obj

    def counted(obj, what: str = "metadata exchange") -> list:
        calls.append(what)
        return inner(obj, what)

    comm.tracer, comm.allgather_obj = tracer, counted  # on the communicator instance
    try:
        out = run()
    finally:
        comm.tracer = None
        del comm.allgather_obj  # the class's method again
    ops = {METADATA: calls}
    for e in tracer.events:
        if e.cat == "comm":
            ops.setdefault(e.name.split("/")[0], []).append(e.bytes)
    return out, ops


def block_input(cfg: dict, comm, layer: str) -> Tensor:
    """X[B,T,C], or this rank's sequence shard X[B,T_r,C] (``chunks.bounds(T, t)``)."""
    x = host_input((cfg["batch"], cfg["seq"], cfg["d_model"]), 1)  # (B, T, C)
    if layer == "sequence":
        start, stop = bounds(cfg["seq"], comm.size)[comm.rank]
        x = x[:, start:stop]  # (B, T_r, C)
    return Tensor(backend.to_device(np.ascontiguousarray(x)), requires_grad=True)


def one_layer(block: Block, comm, cfg: dict, layer: str) -> dict:
    """This rank's shard of ``block`` through one forward and one backward: each pass's
    collectives (:func:`traced`), and the bytes this rank holds (the graph's with its input)."""
    model, x = LAYERS[layer](block, comm), block_input(cfg, comm, layer)
    params = model.parameters()
    out, forward = traced(comm, lambda: model(x))  # (B, T, C) or (B, T_r, C)
    held = graph_bytes(out, params)
    _, backward = traced(comm, lambda: out.backward(out.xp.ones_like(out.data)))
    return {"collectives": {"forward": forward, "backward": backward},
            "param_bytes": int(sum(p.data.nbytes for p in params)),
            "grad_bytes": int(sum(p.grad.nbytes for p in params if p.grad is not None)),
            "activation_bytes": held}


def measure_ranks(comm, cfg: dict) -> dict:
    """One tp group: :func:`one_layer` of each shard of one ``nn.Block`` (float32, dropout 0);
    with ``"time"``, the MLP alone on rank 0 against ParallelFeedForward, and their outputs."""
    b = cfg["block"]
    block = Block(b["d_model"], b["heads"], np.random.default_rng(0), dropout=0.0)
    one = {"param_bytes": int(sum(p.data.nbytes for p in block.parameters())),
           "activation_bytes": graph_bytes(block(block_input(b, comm, "tensor")),
                                           block.parameters())}
    mine = {layer: one_layer(block, comm, b, layer) for layer in LAYERS}
    result = {"one_device": one, "per_rank": comm.allgather_obj(mine, "tensor holdings")}
    if cfg["time"]:
        (n, c), gen = (cfg["mlp"]["tokens"], cfg["mlp"]["d_model"]), np.random.default_rng(0)
        dy = backend.to_device(host_input((n, c), 2))  # (N, C)
        mlp = Sequential(Linear(c, 4 * c, gen), GELU(), Linear(4 * c, c, gen), Dropout(0.0))
        split = ParallelFeedForward(copy.deepcopy(mlp), comm)  # nn.Block's MLP, dropout 0
        timed, (x_one, x_split) = against_one_device(
            comm, mlp, split, host_input((n, c), 1), lambda m, x: m(x).backward(dy), cfg)
        diff = float(abs(backend.to_host(split(x_split).data - mlp(x_one).data)).max())
        result["mlp"] = {"timed": timed, "max_abs_diff": diff}
    return result


def expected(cfg: dict, t: int, layer: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(pass, op) → (count, bytes of each: rank 0's shard for an all-gather) of one block on t
    ranks, from ``Hybrid.describe`` (Shoeybi et al. 2019, §3; Korthikanti et al. 2022, §4.2.2)."""
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
    match), and the bytes of each; last the metadata exchanges, which no description counts."""
    rows = []
    for t, res in results.items():
        for layer in LAYERS if t >= 2 else ():
            want = expected(cfg, t, layer)
            for p in ("forward", "backward"):
                seen = [mine[layer]["collectives"][p] for mine in res["per_rank"]]
                ops = {op for phase, op in want if phase == p} | set(seen[0]) - {METADATA}
                for op in [*sorted(ops), METADATA]:
                    each, (count, nbytes) = seen[0].get(op, []), want.get((p, op), (0, None))
                    sizes = "" if op == METADATA else "/".join(map(str, sorted(set(each))))
                    rows.append({
                        "t": t, "layer": LAYERS[layer].__name__, "pass": p, "op": op,
                        "expected": None if op == METADATA else count, "counted": len(each),
                        "every_rank": all(len(s.get(op, [])) == len(each) for s in seen),
                        "bytes": sizes or None, "formula": nbytes})
    return rows


def param_formula(cfg: dict, t: int, r: int) -> int:
    """Bytes of rank r's shard of one block (``memory_models.gpt_block``), 4 · (6h + (12h² +
    7h)/t) when t divides evenly; its gradients' too (a PARTIAL gradient is whole-shaped)."""
    sizes = Sizes.rank(cfg["batch"], cfg["seq"], cfg["d_model"], cfg["heads"], t, r)
    return FLOAT32 * gpt_block(sizes.c, sizes.q, sizes.hidden)


def activation_formula(cfg: dict, t: int, r: int, layer: str) -> int:
    """Bytes the forward's graph keeps on rank r: ``memory_models.gpt_layer`` in float32
    without dropout, the block's input and output (shards with SP) and the causal mask."""
    sizes = Sizes.rank(cfg["batch"], cfg["seq"], cfg["d_model"], cfg["heads"], t, r,
                       layer == "sequence")
    ends = FLOAT32 * 2 * sizes.shard * sizes.c  # the block's input and output
    return gpt_layer(sizes, FLOAT32, FLOAT32, False, "none") + ends + causal_mask(cfg["seq"])


def measure(args) -> dict:
    cfg, ranks = QUICK if args.quick else CONFIG, args.ranks
    results = {t: job(t, "scratchpar.bench.tensor.driver:measure_ranks",
                      {**cfg, "time": t == TIMED_T}, args.device) for t in ranks}
    b, m, one = cfg["block"], cfg["mlp"], results[ranks[0]]["one_device"]
    mlps = {t: res["mlp"] for t, res in results.items() if "mlp" in res}
    print(f"{headline('tensor benchmark', args)}; block: B {b['batch']}, T {b['seq']}, "
          f"C {b['d_model']}, {b['heads']} heads, float32, dropout 0")
    return {"config": cfg, "ranks": ranks, "one_device": one, **printed({
        "collectives": ("collectives per transformer layer, counted from the trace beside the "
                        "description", collective_rows(results, b)),
        "timing": (f"speed-up of the transformer MLP X[{m['tokens']},{m['d_model']}] → "
                   f"{4 * m['d_model']} → {m['d_model']} against one device, median of "
                   f"{cfg['repeats']} (timed at t = {TIMED_T} only)",
                   [{"t": t, **(row := speedup(mlp["timed"], "tensor")),
                     "efficiency": row["speedup"] / t, "megatron": MEGATRON_T2,
                     "max_abs_diff": f"{mlp['max_abs_diff']:.1e}"} for t, mlp in mlps.items()]),
        "memory": (f"held per rank, one block, against the formulas; nn.Block holds "
                   f"{one['param_bytes']} parameter B, {one['activation_bytes']} activation B",
                   [{"t": t, "layer": layer, "rank": r, "param_bytes": held["param_bytes"],
                     "param_formula": param_formula(b, t, r), "grad_bytes": held["grad_bytes"],
                     "activation_bytes": held["activation_bytes"],
                     "activation_formula": activation_formula(b, t, r, layer),
                     "vs_block": held["activation_bytes"] / one["activation_bytes"]}
                    for t, res in results.items() for layer in LAYERS
                    for r, held in enumerate(mine[layer] for mine in res["per_rank"])])}),
            "timed": {t: mlp["timed"] for t, mlp in mlps.items()}}


BENCHMARK = Benchmark("tensor (Megatron) parallelism: collectives per layer from the trace, "
                      "speed-up at t = 2, bytes held per rank", "a tiny block and MLP", measure,
                      ranks=Ranks((1, 2, 4), (1, 2), what="tp sizes",
                                  more=f"the MLP is timed in the job of {TIMED_T}"))
