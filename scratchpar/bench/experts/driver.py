"""The experts benchmark (docs/experts.md), each measurement beside its formula: drops against
the capacity factor, the load over training, the all-to-alls' bytes and the all-to-all-v against
MPI's, quality per FLOP against dense GPTs, a step at ep = 2 against dp, and memory per ep."""

from __future__ import annotations

from ...jobs.harness import Benchmark, Ranks, draw_figures, finish, headline
from ...jobs.mpijob import job
from ...table import table
from ...trace.figure import pyplot
from . import quality
from .worker import FLOAT32

WORKER = "scratchpar.bench.experts.worker"
CONFIG = {"layer": {"batch": 4, "seq": 64, "d_model": 64, "experts": 8, "k": 2},
          "gpt": {"batch": 4, "seq": 64, "d_model": 64, "heads": 4, "layers": 2, "experts": 8,
                  "k": 2, "capacity": 1.0},
          "quality": quality.CONFIG, "warmup": 2, "repeats": 10}
QUICK = {"layer": {"batch": 2, "seq": 8, "d_model": 16, "experts": 4, "k": 2},
         "gpt": {"batch": 2, "seq": 8, "d_model": 16, "heads": 2, "layers": 1, "experts": 4,
                 "k": 2, "capacity": 1.0},
         "quality": quality.QUICK, "warmup": 1, "repeats": 2}
TIMED = 2  # the machine has 2 cores: only 2 ranks are real compute
TITLES = {"drops": "1. assignments dropped against the capacity factor c (Fedus et al. 2021, "
                   "eq. 3), on a trained sparse GPT's held-out tokens",
          "imbalance": "   the load (busiest expert ÷ mean) over training, with and without the "
                       "balancing loss",
          "traffic": "2. bytes a rank posts over its ep group for one dropless sparse layer",
          "mpi": "   the dispatch's all-to-all-v, pairwise by hand against MPI's own, slowest "
                 "rank's median",
          "per_flop": "3. quality per FLOP: held-out loss at equal steps, training FLOPs per "
                      "token 6·N_active (Kaplan et al. 2020)",
          "steps": "4. a sparse GPT's step at dp 2 against dp 2 × ep 2, slowest rank's median; "
                   "waiting: the most a rank's ep time blocked on the all-to-alls' messages",
          "sleeping": "   one sparse layer (as 2.) forward and backward at dp against ep = the "
                      "ranks, its experts stand-ins sleeping a real expert's calibrated time "
                      "(a sleeping rank holds no core); waiting: as above",
          "memory": "5. what rank 0 holds after a step at each ep against Hybrid.describe"}


def traffic_rows(layers: dict, s: dict) -> list[dict]:
    """Per ep and rank: the bytes posted each way against its routes, (its assignments to other
    ranks' experts + the rows they send it)·C·β, and the counts' 8·(ep − 1)·E/ep bytes forward;
    beside the balanced 2·(ep − 1)/ep·k·T·C·β (GShard §2.2)."""
    rows, row = [], s["d_model"] * FLOAT32
    for ep, found in sorted(layers.items()):
        to = [mine["to"] for mine in found]  # (ep, ep) assignments r → rank j
        for r, mine in enumerate(found):
            routes = sum(to[r]) + sum(to[j][r] for j in range(ep)) - 2 * to[r][r]
            rows.append({"ep": ep, "rank": r, "forward B": mine["forward"],
                         "backward B": mine["backward"], "routes' B": routes * row,
                         "counts B": 8 * (ep - 1) * (s["experts"] // ep),
                         "2(ep−1)/ep·k·T·C·β": 2 * (ep - 1) / ep * s["k"] * mine["tokens"] * row})
    return rows


def mpi_rows(layers: dict) -> list[dict]:
    """Per ep: the dispatch's all-to-all-v by hand and by MPI, the slowest rank's median."""
    rows = []
    for ep, found in sorted(layers.items()):
        by = {a: max(mine["seconds"][a] for mine in found) for a in ("pairwise", "mpi")}
        rows.append({"ep": ep, "pairwise ms": 1e3 * by["pairwise"], "MPI ms": 1e3 * by["mpi"],
                     "pairwise/MPI": by["pairwise"] / by["mpi"]})
    return rows


def step_row(found: dict, dp: str, ep: str, waiting: str) -> dict:
    """A job's medians at ``dp`` and ``ep`` (ms), their ratio, and as ``waiting`` the largest
    share of a rank's ep time blocked on the all-to-alls (``worker.against_dp``)."""
    a, b = (found["timed"][name]["median_s"] for name in (dp, ep))
    return {f"{dp} ms": 1e3 * a, f"{ep} ms": 1e3 * b, "ep/dp": b / a, waiting: found["waited"]}


def sleeping_rows(sleeps: dict) -> list[dict]:
    """Per world size n: one stand-in layer at dp against ep = n, and the expert's fitted time."""
    rows = []
    for n, found in sorted(sleeps.items()):
        (f0, f1), (b0, b1) = found["fits"]
        rows.append({"ranks": n, **step_row(found, "dp", "ep = ranks",
                                             "waiting on all-to-all, of ep"),
                     "expert fwd µs": f"{1e6 * f0:.0f} + {1e6 * f1:.2f}/row",
                     "expert bwd µs": f"{1e6 * b0:.0f} + {1e6 * b1:.2f}/row"})
    return rows


def draw(directory: str, record: dict) -> list[str]:
    """experts.png: the dropped fraction against the capacity factor, and the load over training
    with and without the balancing loss."""
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
    for i, (name, s) in enumerate(record["imbalance"]["series"].items()):
        right.plot(s["step"], s["load"], color=f"C{i}", label=name)
    right.axhline(1.0, color="gray", linestyle=":", label="uniform")
    right.set(xlabel="step", ylabel="load: busiest expert ÷ mean", ylim=(0, None),
              title="expert load over training, with and without the balancing loss")
    return [finish(fig, f"{directory}/experts.png", (left, right))]


def measure(args) -> dict:
    """The jobs and the single-process runs, every table printed: what ``--json`` writes."""
    cfg, eps = QUICK if args.quick else CONFIG, sorted({e for e in args.ranks if e > 1})
    layers = {ep: job(ep, f"{WORKER}:layer", cfg, args.device) for ep in eps}
    steps = job(TIMED, f"{WORKER}:steps", cfg, args.device)
    sleeps = {ep: job(ep, f"{WORKER}:sleeping", cfg, args.device) for ep in eps}
    record = {"config": cfg, "ranks": eps, "drops": quality.drops(cfg["quality"]),
              "imbalance": quality.imbalance(cfg["quality"]),
              "per_flop": quality.per_flop(cfg["quality"]),
              "traffic": traffic_rows(layers, cfg["layer"]), "mpi": mpi_rows(layers),
              "steps": [step_row(steps, "dp 2", "dp 2 × ep 2",
                                 "waiting on all-to-all, of the step")],
              "sleeping": sleeping_rows(sleeps),
              "memory": job(max(eps), f"{WORKER}:held", cfg, args.device)}
    print(f"{headline('experts benchmark', args)}; float32")
    for key, title in TITLES.items():  # the quality tables' rows beside their figure's series
        rows = record[key]["rows"] if isinstance(record[key], dict) else record[key]
        print(table(title, rows, formats={k: ".4f" for k in rows[0] if k.startswith("dropped (")
                                          or k == "held-out loss"}))
    return {**record, "figures": draw_figures(args.figures, draw, record)}


BENCHMARK = Benchmark("experts: drops against capacity, load with and without balancing, "
                      "all-to-all bytes, quality per FLOP, a step at ep = 2, memory per ep",
                      "a tiny sparse GPT", measure, figures="experts.png",
                      ranks=Ranks((2, 4), what="ep sizes",
                                  more=f"the step is timed in a job of its own at {TIMED} ranks"))
