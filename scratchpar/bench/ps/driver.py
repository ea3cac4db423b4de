"""The parameter-server benchmark: three parts, each an MPI job, then their rows and tables."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from ...jobs.harness import Benchmark, describe, draw_figures, ints, machine
from ...jobs.mpijob import job
from ...parallel import SyncParameterServer
from ...parallel.description import Message, Shape
from ...parallel.ps.protocol import Header
from ...table import table
from ..standin import calibrated

CONFIGS = {
    "bottleneck": {"sizes": [256, 1024, 1024, 10], "batch": 96, "calibrate_rows": 32,
                   "lr": 1e-3, "warmup": 3, "repeats": 20, "steps": 20},
    "staleness": {"sizes": [128, 512, 512, 10], "batch": 1536, "calibrate_rows": 512,
                  "workers": 3, "servers": 1, "taus": [0, 1, 2, 4], "lr": 1e-3, "steps": 40,
                  "timeline_steps": 6},
    "loss": {"vocab": 16, "order": 2, "seq": 32, "d_model": 32, "heads": 2, "layers": 2,
             "batch": 16, "workers": 2, "servers": 1, "lr": 1e-2, "steps": 300, "warmup": 50,
             "eval_every": 10, "eval_batches": 2, "final_batches": 8, "eval_rows": 32,
             "rounds": 2}}
QUICK = {"bottleneck": {"sizes": [16, 32, 8], "batch": 12, "calibrate_rows": 4, "warmup": 1,
                        "repeats": 2, "steps": 3},
         "staleness": {"sizes": [16, 32, 8], "batch": 24, "calibrate_rows": 8, "steps": 6,
                       "timeline_steps": 3},
         "loss": {"vocab": 8, "order": 1, "seq": 8, "d_model": 8, "layers": 1, "batch": 4,
                  "steps": 8, "warmup": 3, "eval_every": 4, "eval_batches": 1,
                  "final_batches": 1, "eval_rows": 8}}  # what --quick changes
TIMELINES = {"ssp0": "sync", "ssp1": "ssp1", "async": "async"}  # part 2's run → figure name
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


def bottleneck_rows(results: dict, steps: int) -> list[dict]:
    """Per job and server count: the busiest server's bytes beside the protocol's, and a rank's
    in the ring all-reduce of the same K gradients over the same ranks beside twice its wire
    bytes (:meth:`~scratchpar.parallel.description.Message.wire`: sent, then received)."""
    rows = []
    for n, r in results.items():
        k, itemsize = r["parameters"], r["itemsize"]
        ring = max(x["sent"] + x["received"] for x in r["ring"])
        for s, family in r["family"].items():
            s, report = int(s), family["report"]
            measured, formula = report["bytes"], protocol_bytes(k, itemsize, s, n - s, steps)
            busiest = max(range(s), key=lambda i: measured[i])
            rows.append({"ranks": n, "servers": s, "workers": n - s, "parameters": k,
                         "server_bytes": measured[busiest], "protocol_bytes": formula[busiest],
                         "server_mb_step": measured[busiest] / steps / 1e6,
                         "protocol_mb_step": formula[busiest] / steps / 1e6, "ring_bytes": ring,
                         "ring_formula": round(2 * Message("all-reduce", "dp", k * itemsize,
                                                           1).wire(n)),
                         "ring_mb_step": ring / 1e6, "ratio": measured[busiest] / steps / ring,
                         "busy": max(report["busy"]), "pushes": report["pushes"],
                         "bytes": measured, "protocol": formula})
    return rows


def speed_rows(results: dict, steps: int) -> list[dict]:
    """Per job: ms per step of each contender in turns, and of the family's server at τ = 0
    back to back; × dp = DataParallel's time over the contender's."""
    rows = []
    for n, r in results.items():
        times = {name: t["median_s"] for name, t in r["timed"].items()}
        times.update({f"ssp τ=0 S={s}": f["seconds"] / steps for s, f in r["family"].items()})
        for name, seconds in times.items():
            s = int(name.rsplit("=", 1)[1]) if "S=" in name else 0
            rows.append({"ranks": n, "contender": name, "servers": s or None,
                         "workers": n - s, "ms": 1e3 * seconds, "steps_per_s": 1 / seconds,
                         "vs_dp": times["dp"] / seconds})
    return rows


def speed(rank: dict) -> float:
    """A worker's steps per second, from the aligned start to its last step."""
    return len(rank["ends_s"]) / rank["ends_s"][-1]


def staleness(report: dict) -> tuple[dict[int, int], float, int]:
    """Server 0's histogram {staleness: pushes}, its mean and its max."""
    hist = {int(s): n for s, n in report["staleness_histogram"].items()}
    return hist, sum(s * n for s, n in hist.items()) / max(sum(hist.values()), 1), \
        max(hist, default=0)


def staleness_rows(runs: dict, names: dict) -> tuple[list[dict], list[dict]]:
    """Per contender, its pushes and their staleness from server 0's report; and per contender
    and worker, its steps per second and its wait for the pull (``wait_s``) per step."""
    rows, workers = [], []
    for key, ranks in runs.items():
        report, seconds = ranks[0]["report"], max(r["ends_s"][-1] for r in ranks)
        hist, mean, most = staleness(report)
        mine = [r for r in ranks if r["worker"] is not None]
        rows.append({"contender": names[key], "key": key, "updates": report["version"],
                     "pushes": report["pushes"], "sent": sum(len(r["ends_s"]) for r in mine),
                     "mean": mean, "max": most,
                     "histogram": " ".join(f"{s}:{n}" for s, n in sorted(hist.items())),
                     "staleness_histogram": hist, "busy": max(report["busy"]), "seconds": seconds,
                     "updates_per_s": report["version"] / seconds})
        for r in mine:
            waits = r["metrics"].get("wait_s", [])
            workers.append({"contender": names[key], "worker": r["worker"], "rank": r["rank"],
                            "slowed": r["slowed"], "steps_per_s": speed(r),
                            "wait_ms": 1e3 * statistics.mean(waits) if waits else None,
                            "wait_share": sum(waits) / r["ends_s"][-1] if waits else None})
    return rows, workers


def curve(run: dict, steps: int) -> list[tuple[float, float]]:
    """(seconds from the aligned start, held-out loss) at each of server 0's evaluations."""
    server = run["ranks"][0]
    return [(server["ends_s"][k] if k < steps else server["done_s"], loss)
            for k, loss in run["evals"]]


def training_curve(run: dict) -> list[tuple[float, float]]:
    """(seconds, server 0's loss of that clock over every worker's units) per step."""
    server = run["ranks"][0]
    return [(t, loss) for t, loss in zip(server["ends_s"], server["metrics"]["loss"])
            if not math.isnan(loss)]


def run_seconds(run: dict) -> float:
    """From the aligned start to the last worker's last step."""
    return max(r["ends_s"][-1] for r in run["ranks"] if r["worker"] is not None)


def loss_rows(runs: dict, levels: list[float], steps: int, names: dict) -> list[dict]:
    """Per contender's run: its updates, final held-out loss, seconds to each level, staleness."""
    rows = []
    for key, run in runs.items():
        points, report = curve(run, steps), run["ranks"][0]["report"]
        workers = [r for r in run["ranks"] if r["worker"] is not None]
        _, mean, most = staleness(report) if report else (None, None, None)
        rows.append({"contender": names[key], "updates": report["version"] if report else steps,
                     "seconds": run_seconds(run), "final": points[-1][1],
                     "stale_mean": mean, "stale_max": most,
                     "slowed_steps_per_s": next(speed(r) for r in workers if r["slowed"]),
                     "other_steps_per_s": statistics.mean(speed(r) for r in workers
                                                          if not r["slowed"]),
                     **{f"level{i}": next((t for t, loss in points if loss <= level), None)
                        for i, level in enumerate(levels)}})
    return rows


def configs(quick: bool, figures: str | None) -> tuple[dict, dict]:
    """Each part's job config (stand-ins calibrated, contenders named) and the calibrations."""
    cfgs = {part: {**c, **(QUICK[part] if quick else {})} for part, c in CONFIGS.items()}
    calib = {}
    for part in ("bottleneck", "staleness"):
        cfgs[part], calib[part] = calibrated(cfgs[part], cfgs[part]["sizes"],
                                             cfgs[part]["calibrate_rows"])
    cfgs["staleness"].update(contenders=[{"name": f"ssp{t}", "mode": "ssp", "staleness": t}
                                         for t in cfgs["staleness"]["taus"]]
                             + [{"name": "async", "mode": "async"}],
                             timelines=TIMELINES, traces=figures)
    cfgs["loss"]["contenders"] = [
        {"name": "sync", "mode": "sync"}, {"name": "async", "mode": "async"},
        {"name": "sync-then-async", "mode": "warmup", "warmup": cfgs["loss"]["warmup"]}]
    return cfgs, calib


def draw(directory: str, rows: dict, runs: dict, floor: float, cfgs: dict,
         levels: list[float]) -> list[str]:
    """The three figures (part 3's chosen ``runs``) and part 2's three timelines."""
    from ...trace.timeline_plot import plot_timeline
    from .plot import plot_bottleneck, plot_loss_time, plot_staleness

    out, steps = Path(directory), cfgs["loss"]["steps"]
    paths = [plot_bottleneck(rows["bytes"], rows["speed"], str(out / "ps_bottleneck.png")),
             plot_staleness(rows["staleness"], str(out / "ps_staleness.png")),
             plot_loss_time({k: curve(r, steps) for k, r in runs.items()},
                            {k: training_curve(r) for k, r in runs.items()},
                            floor, levels, str(out / "ps_loss_time.png"))]
    s, w = cfgs["staleness"]["servers"], cfgs["staleness"]["workers"]
    serve = "rank 0 serves" if s == 1 else f"ranks 0–{s - 1} serve"
    roles = f"{serve}, ranks {s}–{s + w - 1} work, rank {s} slowed 2× (its extra sleep: 'slowed')"
    what = {"sync": "synchronous: SSP τ = 0, update for update the synchronous server",
            "ssp1": "SSP τ = 1", "async": "asynchronous (Downpour, τ = ∞)"}
    for name, caption in what.items():
        trace = str(out / f"ps_timeline_{name}.trace.json")
        paths.append(plot_timeline(trace, trace.replace(".trace.json", ".png"),
                                   title=f"{caption}: {roles}"))
    return paths


def print_tables(rows: dict, cfgs: dict, levels: list[float]) -> None:
    """Every part's tables (docs/parameter_server.md, Measurements)."""
    one, stale, loss = cfgs["bottleneck"], cfgs["staleness"], cfgs["loss"]
    print(table(f"1. bytes through the busiest server against one rank of the ring, "
                f"{one['steps']} steps", rows["bytes"],
                {"ranks": "ranks", "S": "servers", "W": "workers", "K": "parameters",
                 "server B": "server_bytes", "protocol B": "protocol_bytes",
                 "server MB/step": "server_mb_step", "ring B/step": "ring_bytes",
                 "2·2(P−1)/P·K·b": "ring_formula", "ring MB/step": "ring_mb_step",
                 "server/ring": "ratio", "busy": "busy"}))
    print(table(f"1. step time, {one['batch']} rows, median of {one['repeats']} after "
                f"{one['warmup']} (dp's one bucket: {rows['dp_all_reduce']})", rows["speed"],
                {"ranks": "ranks", "contender": "contender", "S": "servers", "W": "workers",
                 "ms/step": "ms", "steps/s": "steps_per_s", "× dp": "vs_dp"}))
    print(table(f"2. staleness, {stale['servers']} server + {stale['workers']} workers, "
                f"{stale['steps']} steps, worker 0 slowed 2×", rows["staleness"],
                {"contender": "contender", "updates": "updates", "pushes": "pushes",
                 "sent": "sent", "mean": "mean", "max": "max", "histogram": "histogram",
                 "server busy": "busy", "run s": "seconds", "updates/s": "updates_per_s"}))
    print(table("2. idle time per worker", rows["workers"],
                {"contender": "contender", "worker": "worker", "rank": "rank",
                 "slowed": "slowed", "steps/s": "steps_per_s", "wait ms": "wait_ms",
                 "wait share": "wait_share"}))
    print(table(f"3. loss against wall-clock: GPT d_model {loss['d_model']} on V {loss['vocab']}, "
                f"{loss['servers']} server + {loss['workers']} workers; levels "
                + ", ".join(f"L{i} = {v:.3f}" for i, v in enumerate(levels))
                + f"; each contender's shorter of {loss['rounds']} runs", rows["loss"],
                {"contender": "contender", "updates": "updates", "run s": "seconds",
                 "final held-out": "final", "L0 s": "level0", "L1 s": "level1",
                 "L2 s": "level2", "stale mean": "stale_mean", "stale max": "stale_max",
                 "slowed steps/s": "slowed_steps_per_s", "others steps/s": "other_steps_per_s"}))


def measure(args) -> dict:
    workers = args.workers or ([2, 3] if args.quick else [1, 2, 3])
    if min(workers) < 1:
        raise SystemExit(f"ps: every worker count must be ≥ 1, got {workers}")
    cfgs, calib = configs(args.quick, args.figures)
    most = max(workers) + 1  # part 1 per worker count: S = 2 beside S = 1 at the most ranks
    parts = {"bottleneck": {n: job(n, f"{WORKER}:bottleneck", {
        **cfgs["bottleneck"], "server_counts": [1, 2] if n == most and n >= 3 else [1]},
        args.device, timeout=300) for n in (w + 1 for w in workers)},
             **{name: job(cfgs[name]["servers"] + cfgs[name]["workers"], f"{WORKER}:{name}",
                          cfgs[name], args.device, timeout=300) for name in ("staleness", "loss")}}
    names = {**{f"ssp{t}": f"SSP τ={t}" + (" (sync)" if t == 0 else "")
                for t in cfgs["staleness"]["taus"]},
             "async": "async (τ=∞)", "sync": "sync", "sync-then-async": "sync-then-async"}
    steps, one = cfgs["loss"]["steps"], parts["bottleneck"]
    runs = {key: min(rounds, key=run_seconds)  # the shortest: the least disturbed by other load
            for key, rounds in parts["loss"]["runs"].items()}
    initial = parts["loss"]["initial"]
    best = min(curve(run, steps)[-1][1] for run in runs.values())
    levels = [initial - q * (initial - best) for q in LEVELS]  # of the best final drop
    stale, idle = staleness_rows(parts["staleness"]["runs"], names)
    rows = {"bytes": bottleneck_rows(one, cfgs["bottleneck"]["steps"]),
            "speed": speed_rows(one, cfgs["bottleneck"]["steps"]),
            "dp_all_reduce": ", ".join(sorted({r["dp_all_reduce"]["name"] for r in one.values()})),
            "staleness": stale, "workers": idle, "loss": loss_rows(runs, levels, steps, names)}
    print(f"parameter-server benchmark on {describe(args.device)}, {machine(args)}")
    for part, c in calib.items():
        print(f"stand-in compute ({part}): MLP {'→'.join(map(str, cfgs[part]['sizes']))} "
              f"(K = {c['parameters']:,}) calibrated on the CPU at {c['rows']} rows: forward "
              f"{1e3 * c['forward_s']:.2f} ms, backward {1e3 * c['backward_s']:.2f} ms → "
              f"{1e6 * c['per_row_s']:.2f} µs per row")
    print_tables(rows, cfgs, levels)
    figures = draw_figures(args.figures, draw, rows, runs, parts["loss"]["floor"], cfgs, levels,
                           without="; traces only")
    return {"workers": workers, "config": cfgs, "calibration": calib, "levels": levels,
            "initial": initial, "floor": parts["loss"]["floor"], **rows,
            "results": parts, "figures": figures}


BENCHMARK = Benchmark("parameter servers: the server's bytes against the ring, staleness per "
                      "τ, loss against wall-clock", "tiny models, a few steps", measure,
                      lambda parser: parser.add_argument(
                          "--workers", type=ints, help="comma-separated worker counts W of part "
                          "1, one job of W + 1 ranks each (default 1,2,3; --quick: 2,3)"),
                      indent=None,
                      figures="ps_bottleneck.png, ps_staleness.png, ps_loss_time.png and "
                              "ps_timeline_{sync,ssp1,async}.png, from the Chrome traces "
                              "written beside them")
