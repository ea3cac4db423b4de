"""The parameter-server benchmark: three parts, each an MPI job, then the tables."""

from __future__ import annotations

from pathlib import Path

from ...table import table
from ..harness import Benchmark, describe, draw_figures, ints, machine
from ..mpijob import job
from ..standin import calibrated
from . import report

BOTTLENECK = {"sizes": [256, 1024, 1024, 10], "batch": 96, "calibrate_rows": 32, "lr": 1e-3,
              "warmup": 3, "repeats": 20, "steps": 20}
STALENESS = {"sizes": [128, 512, 512, 10], "batch": 1536, "calibrate_rows": 512, "workers": 3,
             "servers": 1, "taus": [0, 1, 2, 4], "lr": 1e-3, "steps": 40, "timeline_steps": 6}
LOSS = {"vocab": 16, "order": 2, "seq": 32, "d_model": 32, "heads": 2, "layers": 2, "batch": 16,
        "workers": 2, "servers": 1, "lr": 1e-2, "steps": 300, "warmup": 50, "eval_every": 10,
        "eval_batches": 2, "final_batches": 8, "eval_rows": 32, "rounds": 2}
QUICK_BOTTLENECK = {**BOTTLENECK, "sizes": [16, 32, 8], "batch": 12, "calibrate_rows": 4,
                    "warmup": 1, "repeats": 2, "steps": 3}
QUICK_STALENESS = {**STALENESS, "sizes": [16, 32, 8], "batch": 24, "calibrate_rows": 8,
                   "steps": 6, "timeline_steps": 3}
QUICK_LOSS = {**LOSS, "vocab": 8, "order": 1, "seq": 8, "d_model": 8, "layers": 1, "batch": 4,
              "steps": 8, "warmup": 3, "eval_every": 4, "eval_batches": 1, "final_batches": 1,
              "eval_rows": 8}
TIMELINES = {"ssp0": "sync", "ssp1": "ssp1", "async": "async"}  # part 2's run → figure name
WORKER = "scratchpar.bench.ps.worker"


def configs(quick: bool, figures: str | None) -> tuple[dict, dict]:
    """Each part's job config (the stand-ins calibrated, the contenders named) and the
    calibrations."""
    parts = [QUICK_BOTTLENECK, QUICK_STALENESS] if quick else [BOTTLENECK, STALENESS]
    (bottleneck, calib1), (stale, calib2) = (calibrated(c, c["sizes"], c["calibrate_rows"])
                                             for c in parts)
    stale.update(contenders=[{"name": f"ssp{t}", "mode": "ssp", "staleness": t}
                             for t in stale["taus"]] + [{"name": "async", "mode": "async"}],
                 timelines=TIMELINES, traces=figures)
    loss = QUICK_LOSS if quick else LOSS
    loss = {**loss, "contenders": [
        {"name": "sync", "mode": "sync"}, {"name": "async", "mode": "async"},
        {"name": "sync-then-async", "mode": "warmup", "warmup": loss["warmup"]}]}
    return {"bottleneck": bottleneck, "staleness": stale, "loss": loss}, \
        {"bottleneck": calib1, "staleness": calib2}


def draw(directory: str, rows: dict, runs: dict, floor: float, cfgs: dict,
         levels: list[float]) -> list[str]:
    """The three figures (part 3's chosen ``runs``) and part 2's three timelines."""
    from ...trace.timeline_plot import plot_timeline
    from .plot import plot_bottleneck, plot_loss_time, plot_staleness

    out, steps = Path(directory), cfgs["loss"]["steps"]
    paths = [plot_bottleneck(rows["bytes"], rows["speed"], str(out / "ps_bottleneck.png")),
             plot_staleness(rows["staleness"], str(out / "ps_staleness.png")),
             plot_loss_time({k: report.curve(r, steps) for k, r in runs.items()},
                            {k: report.training_curve(r) for k, r in runs.items()},
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
    runs = report.fastest(parts["loss"]["runs"])
    levels = report.loss_levels(runs, parts["loss"]["initial"], steps)
    rows = {"bytes": report.bottleneck_rows(one, cfgs["bottleneck"]["steps"]),
            "speed": report.speed_rows(one, cfgs["bottleneck"]["steps"]),
            "dp_all_reduce": ", ".join(sorted({r["dp_all_reduce"]["name"] for r in one.values()})),
            "staleness": report.staleness_rows(parts["staleness"]["runs"], names),
            "workers": report.worker_rows(parts["staleness"]["runs"], names),
            "loss": report.loss_rows(runs, levels, steps, names)}
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
            "initial": parts["loss"]["initial"], "floor": parts["loss"]["floor"], **rows,
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
