"""The parameter-server benchmark: three parts, each an MPI job, then their rows and tables."""

from __future__ import annotations

import math
import statistics

from ...jobs.harness import Benchmark, Ranks, draw_figures, headline
from ...jobs.mpijob import job
from ...parallel import SyncParameterServer
from ...parallel.description import Message, Shape
from ...parallel.ps.protocol import Header
from ...table import table
from ..standin import calibrated, calibration_line
from .plot import draw

ASYNC = {"name": "async", "mode": "async", "label": "async (τ=∞)"}
CONFIGS = {
    "bottleneck": {"sizes": [256, 1024, 1024, 10], "batch": 96, "calibrate_rows": 32,
                   "lr": 1e-3, "warmup": 3, "repeats": 20, "steps": 20},
    "staleness": {"sizes": [128, 512, 512, 10], "batch": 1536, "calibrate_rows": 512,
                  "workers": 3, "servers": 1, "lr": 1e-3, "steps": 40, "timeline_steps": 6,
                  "contenders": [{"name": f"ssp{t}", "mode": "ssp", "staleness": t,
                                  "label": f"SSP τ={t}" + " (sync)" * (t == 0)}
                                 for t in (0, 1, 2, 4)] + [ASYNC],
                  "timelines": {"ssp0": "sync", "ssp1": "ssp1", "async": "async"}},  # run: file
    "loss": {"vocab": 16, "order": 2, "seq": 32, "d_model": 32, "heads": 2, "layers": 2,
             "batch": 16, "workers": 2, "servers": 1, "lr": 1e-2, "optimizer": "adam",
             "steps": 300, "warmup": 50, "eval_every": 10, "eval_batches": 2, "final_batches": 8,
             "eval_rows": 32, "rounds": 2,
             "contenders": [{"name": "sync", "mode": "sync", "label": "sync"}, ASYNC,
                            {"name": "sync-then-async", "mode": "warmup",
                             "label": "sync-then-async"}]}}
QUICK = {"bottleneck": {"sizes": [16, 32, 8], "batch": 12, "calibrate_rows": 4, "warmup": 1,
                        "repeats": 2, "steps": 3},
         "staleness": {"sizes": [16, 32, 8], "batch": 24, "calibrate_rows": 8, "steps": 6,
                       "timeline_steps": 3},
         "loss": {"vocab": 8, "order": 1, "seq": 8, "d_model": 8, "layers": 1, "batch": 4,
                  "steps": 8, "warmup": 3, "eval_every": 4, "eval_batches": 1,
                  "final_batches": 1, "eval_rows": 8}}  # what --quick changes
WORKER = "scratchpar.bench.ps.worker"
HEADER_BYTES = Header.buffer().nbytes  # 10 float64s with every step and with the leave
LEVELS = (0.5, 0.8, 0.95)  # loss levels: this share of the way to the best final held-out loss


def protocol_bytes(k: int, itemsize: int, servers: int, workers: int, steps: int) -> list[int]:
    """Bytes each server receives and sends when every worker pushes and pulls every step:
    ``steps`` times its description's messages to the workers, then each worker's leave."""
    shape = Shape(k, itemsize, 0, k, 1)
    return [round(steps * sum(m.nbytes * m.count for m in SyncParameterServer.describe(
                shape, servers + workers, servers, server=s).sends if m.axis == "workers"))
            + workers * HEADER_BYTES for s in range(servers)]


def bottleneck_rows(results: dict, steps: int) -> tuple[list[dict], list[dict]]:
    """Per job and S: the busiest server's bytes beside the protocol's, and one ring rank's
    beside twice its wire bytes. Per job and contender: steps per second and × dp, DP's step
    time over its own (the server at τ = 0 ran back to back: a step is its share of the run)."""
    moved, speed = [], []
    for n, r in results.items():
        k, ring = r["parameters"], max(x["sent"] + x["received"] for x in r["ring"])
        for s, family in r["family"].items():
            s, report = int(s), family["report"]
            formula = protocol_bytes(k, r["itemsize"], s, n - s, steps)
            i = max(range(s), key=report["bytes"].__getitem__)  # the busiest server
            server = report["bytes"][i]
            moved.append({"ranks": n, "S": s, "W": n - s, "K": k, "server B": server,
                          "protocol B": formula[i], "server MB/step": server / steps / 1e6,
                          "ring B/step": ring, "2·2(P−1)/P·K·b": round(2 * Message(
                              "all-reduce", "dp", k * r["itemsize"], 1).wire(n)),
                          "ring MB/step": ring / 1e6, "server/ring": server / steps / ring,
                          "busy": max(report["busy"])})
        times = {name: t["median_s"] for name, t in r["timed"].items()}
        times.update({f"ssp τ=0 S={s}": f["seconds"] / steps for s, f in r["family"].items()})
        speed += [{"ranks": n, "contender": name, "steps/s": 1 / t, "× dp": times["dp"] / t}
                  for name, t in times.items()]
    return moved, speed


def summary(ranks: list[dict]) -> dict:
    """A run's updates, its pushes' mean and largest staleness and histogram from server 0's
    report (none without one), and the slowed and the other workers' steps per second."""
    report = ranks[0]["report"] or {"version": len(ranks[0]["ends_s"]), "staleness_histogram": {}}
    hist = {int(s): n for s, n in report["staleness_histogram"].items()}
    rates = {True: [], False: []}  # from the aligned start to each worker's last step
    for r in ranks:
        if r["worker"] is not None:
            rates[r["slowed"]].append(len(r["ends_s"]) / r["ends_s"][-1])
    mean = sum(s * n for s, n in hist.items()) / sum(hist.values()) if hist else None
    return {"updates": report["version"], "stale mean": mean, "stale max": max(hist, default=None),
            "histogram": hist or None, "slowed steps/s": rates[True][0],
            "others steps/s": statistics.mean(rates[False])}


def staleness_row(ranks: list[dict]) -> dict:
    """A run's :func:`summary` and the other workers' mean wait for the pull (``wait_s``): ms
    per step and share of their run."""
    waits = [(r["metrics"]["wait_s"], r["ends_s"][-1]) for r in ranks
             if r["worker"] is not None and not r["slowed"]]
    return {**summary(ranks),
            "others wait ms": statistics.mean(1e3 * statistics.mean(w) for w, _ in waits),
            "others wait share": statistics.mean(sum(w) / end for w, end in waits)}


def loss_curves(run: dict, steps: int) -> tuple[list, list]:
    """Server 0's (seconds from the aligned start, loss): the held-out loss at each evaluation,
    and the training loss of each clock."""
    server = run["ranks"][0]
    return ([(server["ends_s"][k] if k < steps else server["done_s"], loss)
             for k, loss in run["evals"]],
            [(t, loss) for t, loss in zip(server["ends_s"], server["metrics"]["loss"])
             if not math.isnan(loss)])


def run_seconds(run: dict) -> float:
    """From the aligned start to the last worker's last step."""
    return max(r["ends_s"][-1] for r in run["ranks"] if r["worker"] is not None)


def loss_row(run: dict, held_out: list, levels: list[float]) -> dict:
    """A run's updates, seconds, final held-out loss and seconds to each of ``levels`` (None:
    never), then the rest of its :func:`summary`."""
    columns = summary(run["ranks"])
    return {"updates": columns.pop("updates"), "run s": run_seconds(run),
            "final held-out": held_out[-1][1],
            **{f"L{i} s": next((t for t, loss in held_out if loss <= level), None)
               for i, level in enumerate(levels)}, **columns}


def measure(args) -> dict:
    cfgs = {part: {**c, **(QUICK[part] if args.quick else {})} for part, c in CONFIGS.items()}
    calib = {}
    for part in ("bottleneck", "staleness"):
        cfgs[part], calib[part] = calibrated(cfgs[part], cfgs[part]["sizes"],
                                             cfgs[part]["calibrate_rows"])
    bcfg, scfg, lcfg = cfgs["bottleneck"], cfgs["staleness"], cfgs["loss"]
    scfg["traces"] = args.figures
    most = max(args.ranks)  # part 1 per world size: S = 2 beside S = 1 at the most ranks
    parts = {"bottleneck": {n: job(n, f"{WORKER}:bottleneck", {
        **bcfg, "server_counts": [1, 2] if n == most >= 3 else [1]}, args.device, timeout=300)
        for n in args.ranks}}
    for name in ("staleness", "loss"):
        parts[name] = job(cfgs[name]["servers"] + cfgs[name]["workers"], f"{WORKER}:{name}",
                          cfgs[name], args.device, timeout=300)
    runs = {key: min(rounds, key=run_seconds)  # the shortest: the least disturbed by other load
            for key, rounds in parts["loss"]["runs"].items()}
    curves = {key: loss_curves(run, lcfg["steps"]) for key, run in runs.items()}
    initial, floor = parts["loss"]["initial"], parts["loss"]["floor"]
    best = min(held_out[-1][1] for held_out, _ in curves.values())
    levels = [initial - q * (initial - best) for q in LEVELS]  # of the best final drop
    moved, speed = bottleneck_rows(parts["bottleneck"], bcfg["steps"])
    buckets = ", ".join(sorted({r["dp_all_reduce"] for r in parts["bottleneck"].values()}))
    ranks = parts["staleness"]["runs"]
    rows = {"bytes": moved, "speed": speed, "dp_all_reduce": buckets,
            "staleness": {c["name"]: {"contender": c["label"], **staleness_row(ranks[c["name"]])}
                          for c in scfg["contenders"]},
            "loss": {c["name"]: {"contender": c["label"],
                                 **loss_row(runs[c["name"]], curves[c["name"]][0], levels)}
                     for c in lcfg["contenders"]}}
    print(headline("parameter-server benchmark", args))
    for part, c in calib.items():
        print(calibration_line(part, c))
    print(table(f"1. bytes through the busiest server against one rank of the ring, "
                f"{bcfg['steps']} steps", moved))
    print(table(f"1. step time, {bcfg['batch']} rows, median of {bcfg['repeats']} after "
                f"{bcfg['warmup']} (dp's one bucket: {buckets})", speed))
    print(table(f"2. staleness, {scfg['servers']} server + {scfg['workers']} workers, "
                f"{scfg['steps']} steps, worker 0 slowed 2×", list(rows["staleness"].values())))
    named = ", ".join(f"L{i} = {v:.3f}" for i, v in enumerate(levels))
    print(table(f"3. loss against wall-clock: GPT d_model {lcfg['d_model']} on V {lcfg['vocab']}, "
                f"{lcfg['servers']} server + {lcfg['workers']} workers; levels {named}; each "
                f"contender's shorter of {lcfg['rounds']} runs", list(rows["loss"].values())))
    figures = draw_figures(args.figures, draw, rows, curves, floor, levels, cfgs,
                           without="; traces only")
    return {"ranks": args.ranks, "config": cfgs, "calibration": calib, "levels": levels,
            "initial": initial, "floor": floor, **rows, "results": parts, "figures": figures}


BENCHMARK = Benchmark("parameter servers: the server's bytes against the ring, staleness per "
                      "τ, loss against wall-clock", "tiny models, a few steps", measure,
                      ranks=Ranks((2, 3, 4), (3, 4), least=2, what="world sizes of part 1",
                                  more="one job each, 1 server and the rest workers"),
                      figures="ps_bottleneck.png, ps_staleness.png, ps_loss_time.png and "
                              "ps_timeline_{sync,ssp1,async}.png, from the Chrome traces "
                              "written beside them", indent=None)
