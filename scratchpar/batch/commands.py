"""``python -m scratchpar.batch``'s commands: each measures one claim about the batch size,
prints its table and draws its figure."""

from __future__ import annotations

from pathlib import Path

from ..jobs.harness import Benchmark, draw_figures, headline
from ..jobs.mpijob import JobFailed, job
from ..plan.regimes import fit
from ..table import table
from ..train.memory import estimate, measurable
from . import scaling as scaling_sweep
from . import steps as steps_sweep
from .fits import config, largest
from .studies import (
    FIT_LAYOUTS,
    FIT_MODELS,
    MODELS,
    QUICK_FIT_MODELS,
    QUICK_MODELS,
    QUICK_SCALING,
    QUICK_STEP_STUDIES,
    QUICK_TIMING,
    READ_ROWS,
    SCALING,
    SEEDS,
    STEP_STUDIES,
    TIMING,
)
from .throughput import KNEE, knee, sweep


def throughput(args) -> dict:
    """Each model's throughput on one device against its batch, 1 row to 2^k, and its knee."""
    models, timing = (QUICK_MODELS, QUICK_TIMING) if args.quick else (MODELS, TIMING)
    largest = args.largest or (8 if args.quick else 512)
    batches = [2**k for k in range(largest.bit_length()) if 2**k <= largest]
    print(f"{headline('batch throughput', args)}; each point the "
          f"median of {timing['repeats']} steps, the least of {timing['rounds']} rounds")
    sweeps, knees = {}, {}
    for model, flags in models.items():
        rows = sweep([*flags, "--device", args.device], batches, **timing)
        sweeps[model], knees[model] = rows, knee(rows)
        shown = [{"ms": None, "rows_per_s": None, "units_per_s": None, "gain": None, **r,
                  **({"ms": 1e3 * r["seconds"]} if "seconds" in r else {}),
                  "note": "knee" if r["batch"] == knees[model] else r.get("refused")}
                 for r in rows]
        for small, big in zip(shown, shown[1:]):
            if small["rows_per_s"] and big["rows_per_s"]:
                big["gain"] = big["rows_per_s"] / small["rows_per_s"]
        unit = next((r["unit"] for r in rows if "unit" in r), "unit")
        where = f"the knee at {knees[model]}" if knees[model] else \
            f"no knee up to {shown[-1]['batch']}"
        print(table(f"{model} ({' '.join(flags)}), one device: {where} (past the knee, doubling "
                    f"the batch gains less than {KNEE - 1:.0%})", shown,
                    {"batch": "batch", "ms a step": "{ms:.2f}",
                     "rows/s": "{rows_per_s:,.0f}", f"{unit}/s": "{units_per_s:,.0f}",
                     "× on half the batch": "{gain:.2f}", "": "note"}))
    figures = draw_figures(args.figures, lambda d: [_plot(d, sweeps, knees)])
    return {"timing": timing, "sweeps": sweeps, "knees": knees, "figures": figures}


def fits(args) -> dict:
    """Per model and layout, the largest batch the budget fits by the training command's
    estimate, then the command's own two steps at that batch with the budget as all its
    memory (an address-space limit on the CPU, CuPy's pool capped on a GPU): whether they
    ran, and their measured peak beside the estimate's."""
    models = QUICK_FIT_MODELS if args.quick else FIT_MODELS
    budget = int(args.budget * 2**30)
    kind = "of GPU memory" if args.device == "cuda" else "(an address-space limit)"
    print(headline(f"the largest batch in {args.budget:g} GiB a rank {kind}", args))
    found = {}
    for model, flags in models.items():
        rows = [fit_layout([*flags, *more, "--device", args.device], name, world, budget,
                           args.device) for name, more, world in FIT_LAYOUTS]
        shown = [{"expected_mib": None, "peak_mib": None, "error": None, "not_run": None,
                  **r, "ran": "peak" in r} for r in rows]
        print(table(f"{model} ({' '.join(flags)}): each layout's largest batch by the "
                    "estimate, and the command's two steps at it under the budget", shown,
                    {"layout": "layout", "N": "ranks", "batch": "batch",
                     "a multiple of": "step", "estimate MiB (bound)": "{need_mib:.0f}",
                     "a rank has MiB": "{have_mib:.0f}", "ran": "ran",
                     "expected peak MiB": "{expected_mib:.1f}",
                     "measured peak MiB": "{peak_mib:.1f}", "error": "{error:+.0%}",
                     "why not": "not_run"}))
        found[model] = {"flags": flags, "rows": rows}
    figures = draw_figures(args.figures, lambda d: [_plot_fits(d, found, args.budget)])
    return {"budget_bytes": budget, "models": found, "figures": figures}


def fit_layout(flags: list[str], name: str, world: int, budget: int, device: str) -> dict:
    """One layout's largest batch in ``budget`` bytes a rank, then its two real steps there."""
    found = largest(flags, world, budget)
    row = {"layout": name, "ranks": world, "step": found["step"], "batch": found["batch"],
           "need_mib": found["need"] / 2**20, "have_mib": found["have"] / 2**20}
    if found["batch"] is None:
        return row
    cfg = config(flags, world, found["batch"])
    row["expected_mib"] = measurable(cfg, estimate(cfg, world, bound=False)) / 2**20
    try:
        got = job(world, "scratchpar.batch.worker:check", {
            "flags": [*flags, "--batch-size", str(found["batch"])], "budget": budget}, device)
    except JobFailed as failed:
        got = {"not_run": f"the job failed: {str(failed).splitlines()[-1][:80]}"}
    row.update(got)
    if "peak" in got:
        row["peak_mib"] = got["peak"] / 2**20
        row["error"] = row["expected_mib"] / row["peak_mib"] - 1
    return row


def steps(args) -> dict:
    """Per model and batch, the steps to the floor plus a gap at the best of a few rates (the
    median seed's), the regimes fitted to them (S_min, E_min, B_crit), and B_simple where the
    target was met."""
    studies, most, rows, seeds = (QUICK_STEP_STUDIES, 400, 16, 1) if args.quick else \
        (STEP_STUDIES, 4000, READ_ROWS, SEEDS)
    print(f"{headline('steps to a target against the batch', args)}; "
          f"one device, AdamW at a constant rate after 10 steps, at most {most} steps, the "
          f"training loss read over at least {rows} rows, the median of {seeds} seeds")
    found = {}
    for model, (flags, gap, batches, rates) in studies.items():
        result = steps_sweep.sweep([*flags, "--device", args.device], batches, rates, gap,
                                   most, rows, seeds)
        met = [r for r in result["rows"] if r["best"] is not None]
        regimes = fit([r["batch"] for r in met], [r["best"]["steps"] for r in met]) \
            if len(met) >= 2 else None
        shown = [{"batch": r["batch"], "every": r["every"],
                  **{f"lr {lr:g}": steps_sweep.median_steps([t["runs"][k]["steps"]
                                                             for t in r["seeds"]])
                     for k, lr in enumerate(rates)},
                  "best lr": None if r["best"] is None else r["best"]["lr"],
                  "steps": None if r["best"] is None else r["best"]["steps"],
                  "spread": "-" if seeds == 1 else _spread(r["seeds"]),
                  "examples": None if r["best"] is None else r["batch"] * r["best"]["steps"],
                  "b_simple": None if r["best"] is None else r["best"]["b_simple"],
                  "fitted": None if regimes is None else regimes.steps(r["batch"])}
                 for r in result["rows"]]
        columns = {"batch": "batch", "read every": "every",
                   **{f"steps at lr {lr:g}": f"lr {lr:g}" for lr in rates},
                   "best lr": "{best lr:g}", "steps": "steps", "seeds' best": "spread",
                   "B·S": "examples", "fitted S": "{fitted:.0f}",
                   "B_simple there": "{b_simple:.0f}"}
        print(table(f"{model} ({' '.join(flags)}): steps to a training loss of "
                    f"{result['target']:.4f} (the floor + {gap:g}), the median seed's; at "
                    "each rate, the median over the seeds", shown, columns))
        summary = {"target": result["target"], "rows": result["rows"]}
        if regimes is not None:
            measured = sorted(r["b_simple"] for r in shown if r["b_simple"] is not None)
            b_simple = measured[len(measured) // 2] if measured else None
            summary.update(s_min=regimes.s_min, e_min=regimes.e_min, b_crit=regimes.b_crit,
                           rms=regimes.rms, b_simple=b_simple)
            print(f"fit S = S_min + E_min/B: S_min {regimes.s_min:.0f} steps, E_min "
                  f"{regimes.e_min:,.0f} rows, B_crit {regimes.b_crit:.1f} rows (rms "
                  f"{regimes.rms:.1%}); B_simple where the target was met, the median over the "
                  f"batches: {'-' if b_simple is None else f'{b_simple:.1f} rows'}")
        found[model] = summary
    checks = _check_time(found["gpt"], studies["gpt"][0], most, rows, args)
    figures = draw_figures(args.figures, lambda d: [_plot_steps(d, found)])
    return {"models": found, "read_rows": rows, "seeds": seeds, "checks": checks,
            "figures": figures}


def _spread(tries: list[dict]) -> str:
    """The seeds' best steps, least to most ('-' for a seed that did not meet the target)."""
    met = sorted(t["best"]["steps"] for t in tries if t["best"])
    return "–".join(map(str, [met[0], met[-1]])) if met else "-"


def _check_time(summary: dict, flags: list[str], most: int, rows: int, args) -> list[dict]:
    """The planner's time to the target (its one-device step, profiled here, times the fitted
    steps) beside a run of it at the batch's best rate: at the batch nearest B_crit, and at
    the largest that met the target, where the step is longest and the steps fewest."""
    if "b_crit" not in summary:
        return []
    from ..plan.profile import loads
    from ..plan.regimes import Regimes

    met = [r for r in summary["rows"] if r["best"]]
    near = min(met, key=lambda r: abs(r["batch"] - summary["b_crit"]))
    profile = loads(job(2, "scratchpar.plan.calibrate:profile_toml",
                        {"device": args.device, "quick": args.quick}, args.device))
    flags = [*flags, "--device", args.device]
    regimes = Regimes(summary["s_min"], summary["e_min"])
    checks = []
    for row in [near] + ([met[-1]] if met[-1] is not near else []):
        want = steps_sweep.predicted_seconds(flags, row["batch"], regimes.steps(row["batch"]),
                                             profile)
        got = steps_sweep.steps_to([*flags, "--seed", str(row["best"]["seed"])], row["batch"],
                                   row["best"]["lr"], summary["target"], most,
                                   steps_sweep.every_for(row["batch"], rows), noise=False)
        checks.append({**want, "lr": row["best"]["lr"], "measured_s": got["seconds"],
                       "measured_steps": got["steps"]})
    print(table("the planner's time to the target (plan.predict's one-device step, this "
                "model's compute timed here, times the fitted steps) beside a run", checks,
                {"batch": "batch", "rate": "{lr:g}", "step ms": lambda c: 1e3 * c["step_s"],
                 "fitted steps": "{steps:.0f}", "predicted s": "{seconds:.2f}",
                 "run's steps": "measured_steps", "measured s": "{measured_s:.2f}",
                 "error": lambda c: f"{c['seconds'] / c['measured_s'] - 1:+.0%}"}))
    return checks


def scaling(args) -> dict:
    """The held-out loss at a fixed number of examples against the batch, with the rate
    scaled as the batch and with it fixed."""
    flags, batches, base_lr, examples = QUICK_SCALING if args.quick else SCALING
    print(f"{headline('the linear scaling rule', args)}; one device, SGD "
          f"with momentum 0.9, {examples:,} rows whatever the batch, the rate {base_lr:g} at "
          f"{batches[0]} rows, a tenth of the steps warming up")
    rows = scaling_sweep.sweep([*flags, "--device", args.device], batches, base_lr, examples)
    floor = steps_sweep.floor_of(flags)
    print(table(f"gpt ({' '.join(flags)}): held-out loss after {examples:,} rows (the floor "
                f"{floor:.4f})", rows,
                {"batch": "batch", "steps": "steps", "scaled rate": "{scaled_lr:g}",
                 "loss, rate ∝ batch": "{scaled:.4f}", "loss, rate fixed": "{fixed:.4f}"}))
    figures = draw_figures(args.figures, lambda d: [_plot_scaling(d, rows, floor)])
    return {"flags": flags, "base_lr": base_lr, "examples": examples, "floor": floor,
            "rows": rows, "figures": figures}


def _plot_scaling(directory: str, rows: list[dict], floor: float) -> str:
    from .plot import plot_scaling

    return plot_scaling(rows, floor, str(Path(directory) / "batch_scaling.png"))


def _plot_fits(directory: str, found: dict, budget_gib: float) -> str:
    from .plot import plot_fits

    return plot_fits(found, budget_gib, str(Path(directory) / "batch_fits.png"))


def _plot_steps(directory: str, found: dict) -> str:
    from .plot import plot_steps

    return plot_steps(found, str(Path(directory) / "batch_steps.png"))


def _plot(directory: str, sweeps: dict, knees: dict) -> str:
    from .plot import plot_throughput

    return plot_throughput(sweeps, knees, str(Path(directory) / "batch_throughput.png"))


COMMANDS = {
    "throughput": Benchmark(
        "throughput against the batch on one device, for the GPT, the LSTM and the MLP, and "
        "where doubling the batch stops paying", "tiny models, batches 1 to 8", throughput,
        lambda parser: parser.add_argument("--largest", type=int, metavar="B",
                                           help="the largest batch tried, a power of two "
                                                "(default 512; --quick 8)"),
        figures="batch_throughput.png"),
    "fits": Benchmark(
        "the largest batch a memory budget fits, for each strategy, by the training command's "
        "estimate, then checked by its own steps under that budget", "a tiny GPT and MLP", fits,
        lambda parser: parser.add_argument("--budget", type=float, default=1.0, metavar="GIB",
                                           help="memory a rank may use, in GiB (default 1)"),
        figures="batch_fits.png"),
    "steps": Benchmark(
        "steps to a target loss against the batch, each at its best of a few learning rates; "
        "the regimes fitted (S_min, E_min, B_crit) beside the noise scale B_simple",
        "tiny models, three batches, two rates", steps, figures="batch_steps.png"),
    "scaling": Benchmark(
        "the linear scaling rule: the held-out loss at a fixed number of examples against the "
        "batch, the rate scaled as the batch (with warm-up) and fixed", "a tiny GPT, three "
        "batches", scaling, figures="batch_scaling.png"),
}
