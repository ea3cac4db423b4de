"""The experts benchmark (docs/experts.md), each measurement beside its formula: tokens dropped
against the capacity factor and the load over training, the bytes a sparse layer's
all-to-alls send against 2·(ep − 1)/ep·k·tokens·h·β, the hand-written all-to-all-v against
MPI's, quality per FLOP against dense GPTs, a step at ep = 2 against dp, and what a rank holds
at each ep against the estimate."""

from __future__ import annotations

from ...jobs.harness import Benchmark, Ranks, draw_figures, finish, headline
from ...jobs.mpijob import job
from ...parallel import Hybrid
from ...parallel.description import Shape
from ...table import table
from ...trace.figure import pyplot
from . import quality
from .worker import sparse_gpt

WORKER = "scratchpar.bench.experts.worker"
CONFIG = {"layer": {"batch": 4, "seq": 64, "d_model": 64, "experts": 8, "k": 2},
          "gpt": {"batch": 4, "seq": 64, "d_model": 64, "heads": 4, "layers": 2, "experts": 8,
                  "k": 2, "capacity": 1.0},
          "quality": quality.CONFIG, "warmup": 2, "repeats": 10}
QUICK = {"layer": {"batch": 2, "seq": 8, "d_model": 16, "experts": 4, "k": 2},
         "gpt": {"batch": 2, "seq": 8, "d_model": 16, "heads": 2, "layers": 1, "experts": 4,
                 "k": 2, "capacity": 1.0},
         "quality": quality.QUICK, "warmup": 1, "repeats": 2}
FLOAT32, ADAM_MOMENTS = 4, 2
TIMED = 2  # the machine has 2 cores: only 2 ranks are real compute


def traffic_rows(layers: dict, s: dict) -> list[dict]:
    """Per ep and rank: the bytes posted forward and backward against what its routes send,
    (its assignments to other ranks' experts + the rows they send it)·C·β, and the counts'
    8·(ep − 1)·E/ep bytes forward; beside the balanced 2·(ep − 1)/ep·k·T·C·β."""
    rows, row = [], s["d_model"] * FLOAT32
    for ep, found in sorted(layers.items()):
        to = [mine["to"] for mine in found["per_rank"]]  # (ep, ep) assignments r → rank j
        for r, mine in enumerate(found["per_rank"]):
            away = sum(to[r]) - to[r][r]
            arrived = sum(to[j][r] for j in range(ep)) - to[r][r]
            counts = 8 * (ep - 1) * (s["experts"] // ep)
            rows.append({"ep": ep, "rank": r, "forward B": mine["forward"]["bytes"],
                         "backward B": mine["backward"]["bytes"],
                         "routes' B": (away + arrived) * row, "counts B": counts,
                         "2(ep−1)/ep·k·T·C·β": 2 * (ep - 1) / ep * s["k"] * mine["tokens"]
                         * row})
    return rows


def mpi_rows(layers: dict) -> list[dict]:
    """Per ep: the dispatch's all-to-all-v by hand and by MPI, slowest rank's median."""
    rows = []
    for ep, found in sorted(layers.items()):
        by = {a: max(m["seconds"][a] for m in found["per_rank"]) for a in ("pairwise", "mpi")}
        rows.append({"ep": ep, "pairwise ms": 1e3 * by["pairwise"], "MPI ms": 1e3 * by["mpi"],
                     "pairwise/MPI": by["pairwise"] / by["mpi"]})
    return rows


def memory_rows(found: dict, cfg: dict, world: int) -> list[dict]:
    """Per ep: rank 0's held bytes against ``Hybrid.describe``'s (its experts E/ep)."""
    g, model = cfg["gpt"], sparse_gpt(cfg)
    shape = Shape.of(model, FLOAT32, ADAM_MOMENTS)
    experts = sum(p.size for name, p in model.named_parameters() if ".experts." in name)
    rows = []
    for ep, held in sorted(found["per_rank"][0].items(), key=lambda kv: int(kv[0])):
        holds = Hybrid.describe(shape, world, rows=g["batch"] * world, ep=int(ep),
                                sparse=(g["layers"], experts, g["k"])).holds
        for part in ("parameters", "gradients", "optimizer"):
            rows.append({"ep": int(ep), "state": part, "held B": held[part],
                         "estimate B": holds[part], "ratio": held[part] / holds[part]})
    return rows


def step_rows(steps: dict) -> list[dict]:
    dp, ep = (steps["timed"][k]["median_s"] for k in ("dp 2", "dp 2, ep 2"))
    waits = [e["waited_s"] / e["step_s"] for e in steps["exchange"]]
    return [{"dp 2 ms": 1e3 * dp, "dp 2 × ep 2 ms": 1e3 * ep, "ep/dp": ep / dp,
             "waiting on all-to-all, of the step": max(waits)}]


def sleeping_rows(sleeps: dict) -> list[dict]:
    """Per world size n: one layer at dp (every rank every expert) against ep = n."""
    rows = []
    for n, found in sorted(sleeps.items()):
        dp, ep = (found["timed"][k]["median_s"] for k in ("dp", f"ep {n}"))
        (f0, f1), (b0, b1) = found["fits"]
        rows.append({"ranks": n, "dp ms": 1e3 * dp, "ep = ranks ms": 1e3 * ep, "ep/dp": ep / dp,
                     "waiting on all-to-all, of ep": found["waited"],
                     "expert fwd µs": f"{1e6 * f0:.0f} + {1e6 * f1:.2f}/row",
                     "expert bwd µs": f"{1e6 * b0:.0f} + {1e6 * b1:.2f}/row"})
    return rows


def draw(directory: str, record: dict) -> list[str]:
    """One PNG: dropped fraction against the capacity factor, and the load over training with
    and without the balancing loss."""
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(12, 4.6))
    rows = record["drops"]["rows"]
    factors = [r["capacity factor"] for r in rows]
    left.plot(factors, [r["dropped (measured)"] for r in rows], "o-", label="measured")
    left.plot(factors, [r["dropped (from the loads)"] for r in rows], "x--",
              label="Σᵢ max(routedᵢ − ⌈kTc/E⌉, 0) / kT")
    left.plot(factors, [r["dropped (uniform loads)"] for r in rows], ":", color="gray",
              label="uniform loads: max(1 − c, 0)")
    left.set(xlabel="capacity factor c", ylabel="assignments dropped",
             title="drops on the trained model's held-out tokens")
    quality.draw_imbalance(right, record["imbalance"]["series"])
    return [finish(fig, f"{directory}/experts.png", (left, right))]


def measure(args) -> dict:
    cfg = QUICK if args.quick else CONFIG
    eps = sorted({e for e in args.ranks if e > 1})
    layers = {ep: job(ep, f"{WORKER}:layer", cfg, args.device) for ep in eps}
    world = max(eps)
    held = job(world, f"{WORKER}:held", cfg, args.device)
    steps = job(TIMED, f"{WORKER}:steps", cfg, args.device)
    sleeps = {ep: job(ep, f"{WORKER}:sleeping", cfg, args.device) for ep in eps}
    q, s, g = cfg["quality"], cfg["layer"], cfg["gpt"]
    record = {"config": cfg, "ranks": eps, "drops": quality.drops(q),
              "imbalance": quality.imbalance(q), "per_flop": quality.per_flop(q),
              "traffic": traffic_rows(layers, s), "mpi": mpi_rows(layers),
              "steps": step_rows(steps), "sleeping": sleeping_rows(sleeps),
              "memory": memory_rows(held, cfg, world)}
    print(f"{headline('experts benchmark', args)}; float32")
    print(table("1. assignments dropped against the capacity factor c, on a trained sparse "
                "GPT's held-out tokens: measured, and from the loads routedᵢ with ⌈k·T·c/E⌉ "
                "slots an expert (Fedus et al. 2021, eq. 3)", record["drops"]["rows"],
                formats={k: ".4f" for k in record["drops"]["rows"][0] if k.startswith("dropped")}))
    print(table("   the load (busiest expert's assignments ÷ the mean) over training, with and "
                "without the balancing loss α·E·Σ fᵢ·Pᵢ", record["imbalance"]["rows"],
                formats={"held-out loss": ".4f"}))
    print(table(f"2. bytes a rank posts over its ep group for one sparse layer (B {s['batch']}, "
                f"T {s['seq']}, C {s['d_model']}, E {s['experts']}, k {s['k']}, dropless), "
                "against its routes: forward = routes' + counts, backward = routes'; beside "
                "the balanced 2·(ep − 1)/ep·k·T·C·β (GShard §2.2); the routing's tally, a "
                "pickled exchange over dp × cp, is apart",
                record["traffic"]))
    print(table("   the dispatch's all-to-all-v, pairwise by hand against MPI's own, median "
                f"of {cfg['repeats']}", record["mpi"]))
    print(table("3. quality per FLOP: held-out loss at equal steps, training FLOPs per token "
                "6·N_active (Kaplan et al. 2020)", record["per_flop"]["rows"],
                formats={"held-out loss": ".4f"}))
    print(table(f"4. a sparse GPT's step (C {g['d_model']}, {g['layers']} layers, E "
                f"{g['experts']}, k {g['k']}) at dp 2 against dp 2 × ep 2, median of "
                f"{cfg['repeats']} after {cfg['warmup']}; waiting: the ep ranks' time blocked "
                "on the all-to-alls' messages", record["steps"]))
    print(table("   one sparse layer (as 2.) forward and backward at dp against ep = the ranks, "
                "its experts stand-ins sleeping a real expert's calibrated time for their rows "
                f"(a sleeping rank holds no core), slowest rank's median of {cfg['repeats']}; "
                "waiting: as above, the rank that waited most",
                record["sleeping"]))
    print(table(f"5. what rank 0 holds after a step at each ep on {world} ranks (Adam, float32) "
                "against Hybrid.describe: the experts' share of each state over ep",
                record["memory"]))
    return {**record, "figures": draw_figures(args.figures, draw, record)}


BENCHMARK = Benchmark("experts: drops against capacity, load with and without balancing, "
                      "all-to-all bytes, quality per FLOP, a step at ep = 2, memory per ep",
                      "a tiny sparse GPT", measure, figures="experts.png",
                      ranks=Ranks((2, 4), what="ep sizes",
                                  more=f"the step is timed in a job of its own at {TIMED} ranks"))
