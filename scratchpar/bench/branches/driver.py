"""The branches benchmark: a Towers step alone on rank 0 and split by branch, per world size."""

from __future__ import annotations

import numpy as np

from ... import backend
from ...autograd import functional as F
from ...autograd.held import graph_bytes
from ...comm.chunks import counts
from ...jobs.harness import Benchmark, Ranks, headline
from ...jobs.mpijob import job
from ...nn import Towers
from ...parallel import ParallelBranches
from ...table import printed
from ..timing import against_one_device, speedup

CONFIG = {"features": 512, "sizes": [768, 768], "k": 4, "classes": 10, "batch": 256,
          "warmup": 2, "repeats": 30}
QUICK = {"features": 16, "sizes": [32, 16], "k": 3, "classes": 4, "batch": 8, "warmup": 1,
         "repeats": 2}
FLOAT32 = 4


def holdings(model, x, y) -> dict:
    """What this rank holds for ``model``: parameter bytes, and the bytes one forward's graph
    keeps (the input included), with that forward's loss."""
    params, loss = model.parameters(), F.cross_entropy(model(x), y)
    return {"param_bytes": int(sum(p.data.nbytes for p in params)),
            "activation_bytes": graph_bytes(loss, params), "loss": float(loss.item())}


def measure_ranks(comm, cfg: dict) -> dict:
    """One rank of the job: the float32 Towers (seed 0) alone on rank 0 and as
    ``ParallelBranches`` over every rank, stepped in turns on one batch; then their holdings."""
    gen = np.random.default_rng(1)
    x = gen.standard_normal((cfg["batch"], cfg["features"])).astype(np.float32)  # (B, F)
    y = backend.to_device(gen.integers(0, cfg["classes"], cfg["batch"]))  # (B,)
    one, whole = (Towers(cfg["features"], cfg["sizes"], cfg["k"], cfg["classes"],
                         np.random.default_rng(0), dtype=np.float32) for _ in range(2))
    split = ParallelBranches(whole, comm)
    timed, (x_one, x_split) = against_one_device(
        comm, one, split, x, lambda m, x: F.cross_entropy(m(x), y).backward(), cfg)
    mine = {"towers": len(split.towers), **holdings(split, x_split, y)}
    return {"timed": timed, "one_device": holdings(one, x_one, y),
            "per_rank": comm.allgather_obj(mine, "branches holdings")}


def param_formula(cfg: dict, towers: int) -> int:
    """Bytes of ``towers`` towers (each Linear: D_in·D_out + D_out) and the k·H → C head."""
    widths = [cfg["features"], *cfg["sizes"]]
    tower = sum(d * f + f for d, f in zip(widths[:-1], widths[1:]))
    head = cfg["k"] * cfg["sizes"][-1] * cfg["classes"] + cfg["classes"]
    return FLOAT32 * (towers * tower + head)


def measure(args) -> dict:
    cfg = QUICK if args.quick else CONFIG
    k = cfg["k"]
    results = {n: job(n, "scratchpar.bench.branches.driver:measure_ranks", cfg, args.device)
               for n in args.ranks}
    one = results[args.ranks[0]]["one_device"]
    print(f"{headline('branches benchmark', args)}: Towers ({k} towers "
          f"{'→'.join(map(str, [cfg['features'], *cfg['sizes']]))}, head {cfg['classes']}), "
          f"batch {cfg['batch']}, float32; forward + backward, median of {cfg['repeats']}")
    return {"config": cfg, "ranks": args.ranks, "one_device": one, **printed({
        "timing": ("step time against one device", [  # ideal: if the head cost nothing
            {"ranks": n, "towers_per_rank": "/".join(map(str, counts(k, n))),
             **speedup(r["timed"], "branches"), "ideal": k / max(counts(k, n))}
            for n, r in results.items()]),
        "memory": (f"held per rank, against one device ({one['param_bytes']} parameter B, "
                   f"{one['activation_bytes']} activation B)", [
            {"ranks": n, "rank": rank, "towers": mine["towers"],
             "param_bytes": mine["param_bytes"],
             "param_formula": param_formula(cfg, mine["towers"]),
             "param_share": mine["param_bytes"] / one["param_bytes"],
             "activation_bytes": mine["activation_bytes"],
             "activation_share": mine["activation_bytes"] / one["activation_bytes"],
             "loss_diff": f"{abs(mine['loss'] - one['loss']):.1e}"}
            for n, r in results.items() for rank, mine in enumerate(r["per_rank"])])}),
            "timed": {n: r["timed"] for n, r in results.items()}}


BENCHMARK = Benchmark("model parallelism over branches: a Towers step split over the ranks "
                      "against one device", "a tiny Towers", measure,
                      ranks=Ranks((1, 2), more="each job also times one device, rank 0 alone"))
