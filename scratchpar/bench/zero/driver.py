"""The ZeRO benchmark: one MPI job per world size, then the tables and the figures."""

from __future__ import annotations

from pathlib import Path

from ...jobs.harness import Benchmark, Ranks, draw_figures, finish, headline, judge, stacked
from ...jobs.mpijob import job
from ...parallel.zero.formula import PARTS, formula
from ...table import table
from ...trace.figure import pyplot
from ...train.memory_models import KiB, MiB
from .worker import CONTENDERS, FLOAT32, stage_of

CLI = {"vocab": 32, "seq": 64, "d_model": 64, "heads": 4, "layers": 2, "batch": 32,
       "grad_clip": 1.0, "steps": 2, "bucket_kib": 64}  # scratchpar/train/config.py's defaults
TINY = {**CLI, "vocab": 16, "seq": 16, "heads": 2, "layers": 4, "batch": 8, "steps": 1}
CONFIG = {"models": {"cli": CLI, "large": {**CLI, "d_model": 256, "layers": 4,
                                           "bucket_kib": 1024}}, "warmup": 3, "repeats": 20}
QUICK = {"models": {"cli": {**TINY, "d_model": 16, "bucket_kib": 4},
                    "large": {**TINY, "d_model": 32, "bucket_kib": 16}},
         "warmup": 1, "repeats": 2}
WORKER, TRACE = "scratchpar.bench.zero.worker:world", "zero3_timeline.trace.json"
TARGET, TARGET_RANKS = 1.5, 2  # docs/zero.md: ZeRO-3's step ≤ TARGET × DP's
SHORT = dict(zip(PARTS, ("params", "grads", "optim", "host")))
BEYOND = {"buckets": ("buckets",), "gathered": ("gathered",),
          "scratch": ("scratch", "host scratch")}  # column → the ledger's parts it sums
LABELS = {name: ("DP" if stage == 0 else f"ZeRO-{stage}") + (" offload" if off else "")
          for name in CONTENDERS for stage, off in [stage_of(name)]}
BYTES = {"params": "#4c72b0", "grads": "#dd8452", "optim": "#55a868", "host": "#8172b3",
         "buckets": "#c44e52", "gathered": "#e5ae38", "scratch": "#999999"}  # column → color
SPLIT = {"forward": "#4c72b0", "backward + comm": "#dd8452", "copies": "#c44e52",
         "update": "#55a868"}


def states(n: int, name: str, peak: dict, psi: int, itemsize: int, k: int, scale: int) -> dict:
    """Rank 0's peak of each part ZeRO's formula names (Rajbhandari et al. 2020, §5) beside the
    formula's, in units of ``scale`` bytes, and measured/formula of their sums."""
    stage, offload = stage_of(name)
    want = formula(stage, psi, n, itemsize, k, offload)
    return {"N": n, "contender": LABELS[name],
            **{SHORT[p]: peak.get(p, 0) / scale for p in PARTS},
            **{f"f.{SHORT[p]}": want.get(p, 0) / scale for p in PARTS},
            "measured/formula": sum(peak.get(p, 0) for p in PARTS) / sum(want.values())}


def memory_rows(results: dict, model: str) -> dict:
    """``model``'s Ψ, its unit (KiB below 4 MiB of parameters) and per world size and contender
    rank 0's bytes: :func:`states` under AdamW in float32, the buffers beyond, the activations."""
    psi = results[min(results)]["memory"][model]["psi"]
    name, scale = ("MiB", MiB) if psi * FLOAT32 >= 4 * MiB else ("KiB", KiB)
    rows = []
    for n, res in results.items():
        for contender, held in res["memory"][model]["held"].items():
            peak = held["peak"]
            rows.append({**states(n, contender, peak, psi, FLOAT32, 2 * FLOAT32, scale),
                         **{col: sum(peak.get(p, 0) for p in parts) / scale
                            for col, parts in BEYOND.items()},
                         "activations": held["activations"] / scale})
    return {"psi": psi, "unit": name, "rows": rows}


def step_rows(results: dict) -> list[dict]:
    """Per world size and contender, the step (the slowest rank's median), its ratio to DP's,
    and rank 0's medians of its step and of its phases (``worker.phases``)."""
    rows = []
    for n, res in results.items():
        step_s, phases_s = res["timing"]["step_s"], res["timing"]["phases_s"]
        for name in CONTENDERS:
            total, forward, copies, update = (1e3 * s for s in phases_s[name])
            rows.append({"N": n, "contender": LABELS[name], "ms/step": 1e3 * step_s[name],
                         "× DP": step_s[name] / step_s["dp"], "rank 0 ms": total,
                         "forward": forward, "backward + comm": total - forward - copies - update,
                         "copies": copies, "update": update, "copies %": 100 * copies / total})
    return rows


def checkpoint_rows(results: dict) -> list[dict]:
    """Per world size and way, ZeRO-3's save and resume (the slowest rank's medians) and the
    megabytes its busiest rank writes."""
    return [{"N": n, "written by": label,
             "save ms": 1e3 * res["checkpoints"]["timed"][f"{way} save"]["median_s"],
             "resume ms": 1e3 * res["checkpoints"]["timed"][f"{way} load"]["median_s"],
             "busiest rank MB": res["checkpoints"]["written"][k] / 1e6}
            for n, res in results.items() for k, (way, label) in enumerate(
                [("pieces", "every rank, its pieces"), ("rank 0", "rank 0, the whole state")])]


def target_ranks(ranks) -> int:
    """The world size the target is judged and the ZeRO-3 step traced at."""
    return TARGET_RANKS if TARGET_RANKS in ranks else min(ranks)


def zero3_target(steps: list[dict], device: str) -> dict:
    """ZeRO-3's step over DP's at TARGET_RANKS ranks (or the smallest world timed)."""
    n = target_ranks({r["N"] for r in steps})
    ratio = next(r["× DP"] for r in steps if (r["N"], r["contender"]) == (n, "ZeRO-3"))
    return {"ranks": n, "ratio": ratio, "target": TARGET,
            "verdict": judge(device, ratio, at_most=TARGET)}


def shape(spec: dict) -> str:
    """A GPT's sizes, as the titles name them."""
    return (f"GPT d_model {spec['d_model']}, {spec['layers']} layers, T {spec['seq']}, batch "
            f"{spec['batch']}, buckets {spec['bucket_kib']} KiB")


def bars(ax, x, rows: list[dict], colors: dict, width: float) -> None:
    """A bar at each of ``x``, one a row, stacked from its columns named in ``colors``."""
    stacked(ax, x, [(key, color, [r[key] for r in rows]) for key, color in colors.items()], width)
    ax.set_xticks(list(x), [r["contender"].replace(" ", "\n") for r in rows], fontsize=8)


def plot_memory(memory: dict, spec: dict, out_path: str) -> str:
    """One panel per world size: per contender, rank 0's peak bytes stacked by part, and a
    dashed outline at the formula's parameters + gradients + optimizer + host."""
    ranks = sorted({r["N"] for r in memory["rows"]})
    fig, axes = pyplot().subplots(1, len(ranks), figsize=(1.5 + 6.5 * len(ranks), 5.6),
                                  squeeze=False, sharey=True)
    for ax, n in zip(axes[0], ranks):
        mine = [r for r in memory["rows"] if r["N"] == n]
        bars(ax, range(len(mine)), mine, BYTES, 0.6)
        formula = [sum(v for key, v in r.items() if key.startswith("f.")) for r in mine]
        ax.bar(range(len(mine)), formula, 0.8, fill=False, edgecolor="black", linestyle="--",
               linewidth=1.2, label="formula: params + grads + optim + host")
        ax.set_title(f"N = {n} ranks")
    axes[0][0].set_ylabel(f"peak per rank, rank 0 ({memory['unit']})")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=4,
               frameon=False, fontsize=8)
    fig.suptitle(f"ZeRO: bytes held per rank by part against the formula\nGPT d_model "
                 f"{spec['d_model']}, {spec['layers']} layers, Ψ = {memory['psi']:,}, AdamW "
                 f"float32, buckets {spec['bucket_kib']} KiB (activations, the same for all, "
                 "not drawn)", fontsize=10)
    return finish(fig, out_path, axes[0], dpi=130, legend=False, rect=(0, 0.1, 1, 1), axis="y")


def plot_offload(steps: list[dict], ranks: int, out_path: str) -> str:
    """Per stage, the step without and with offload side by side, stacked: forward, backward
    with the collectives, the copies to and from the host, the update (rank 0's medians)."""
    mine = sorted((r for r in steps if r["N"] == ranks and r["contender"] != "DP"),
                  key=lambda r: r["contender"])  # ZeRO-1, ZeRO-1 offload, ZeRO-2…
    fig, ax = pyplot().subplots(figsize=(8, 4.6))
    bars(ax, [i + (i // 2) * 0.5 for i in range(len(mine))], mine, SPLIT, 0.8)
    ax.set(ylabel="ms per step (rank 0, median)",
           title=f"ZeRO-Offload's step against the stage on the device, N = {ranks}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return finish(fig, out_path, [ax], dpi=130, legend=False, axis="y")


def draw(directory: str, record: dict) -> list[str]:
    """The three figures docs/zero.md shows: their paths."""
    from ...trace.timeline_plot import plot_timeline

    out, n, models = Path(directory), record["target"]["ranks"], record["config"]["models"]
    return [plot_memory(record["memory"]["large"], models["large"], str(out / "zero_memory.png")),
            plot_timeline(str(out / TRACE), str(out / "zero3_timeline.png"),
                          title=f"one ZeRO-3 step, N = {n}, {shape(models['cli'])}"),
            plot_offload(record["steps"], n, str(out / "zero_offload.png"))]


def measure(args) -> dict:
    cfg, ranks = QUICK if args.quick else CONFIG, args.ranks
    trace = str(Path(args.figures).resolve() / TRACE) if args.figures else None
    results = {n: job(n, WORKER, {**cfg, "trace": trace if n == target_ranks(ranks) else None},
                      args.device) for n in ranks}
    steps = step_rows(results)
    record = {"config": cfg, "ranks": ranks,
              "memory": {model: memory_rows(results, model) for model in cfg["models"]},
              "steps": steps, "target": zero3_target(steps, args.device),
              "checkpoints": checkpoint_rows(results)}
    models, target = cfg["models"], record["target"]
    print(f"{headline('zero benchmark', args)}; world sizes {ranks}")
    for model, mem in record["memory"].items():
        print(table(f"1. bytes per rank ({mem['unit']}), {shape(models[model])}, Ψ = "
                    f"{mem['psi']:,}: rank 0's peak per part beside the formula's (f.)",
                    mem["rows"]))
    print(table(f"2. step time (ms), {shape(models['cli'])}: the slowest rank's median of "
                f"{cfg['repeats']}, and rank 0's medians of its phases", steps))
    print(f"\nZeRO-3 ≤ {TARGET}× DP: {target['verdict']} ({target['ratio']:.2f}×, "
          f"N = {target['ranks']})")
    print(table(f"4. ZeRO-3's checkpoints, {shape(models['large'])}: by every rank's pieces or "
                "through rank 0 (the slowest rank's medians)", record["checkpoints"],
                formats={"busiest rank MB": ".3f"}))
    return {**record, "figures": draw_figures(args.figures, draw, record, without="; trace only")}


BENCHMARK = Benchmark("ZeRO stages 1-3 and offload: bytes per rank against the formula, step "
                      "time against DP, offload's copies, checkpoints in pieces against rank "
                      "0's", "tiny GPTs, a few steps, N = 2 only",
                      measure, indent=1, ranks=Ranks((2, 4), (2,), more="one job each"),
                      figures="zero_memory.png, zero3_timeline.png with its Chrome trace, and "
                              "zero_offload.png")
