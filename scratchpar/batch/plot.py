"""The batch-size measurements drawn."""

from __future__ import annotations

from ..jobs.harness import finish
from ..trace.figure import pyplot


def plot_throughput(sweeps: dict[str, list[dict]], knees: dict, out_path: str) -> str:
    """Rows per second against the batch, log-log, one line per model, each knee ringed: past
    it, doubling the batch gains less than 10%."""
    fig, ax = pyplot().subplots(figsize=(6.4, 4.4))
    for model, rows in sweeps.items():
        ran = [r for r in rows if "rows_per_s" in r]
        line, = ax.plot([r["batch"] for r in ran], [r["rows_per_s"] for r in ran], marker="o",
                        markersize=4, label=model)
        at = next((r for r in ran if r["batch"] == knees.get(model)), None)
        if at is not None:
            ax.scatter([at["batch"]], [at["rows_per_s"]], s=160, facecolors="none",
                       edgecolors=line.get_color(), linewidths=1.5)
    ax.plot([], [], "o", markerfacecolor="none", markeredgecolor="grey",
            label="the knee: doubling gains < 10%")
    ax.set(xscale="log", yscale="log", xlabel="batch (rows) on one device",
           ylabel="rows per second", title="throughput against the batch")
    batches_axis(ax)
    return finish(fig, out_path, [ax], dpi=130)


def plot_steps(found: dict, out_path: str) -> str:
    """Steps to the target against the batch, log-log, per model: each seed's best and the
    median seed's, the fitted S_min + E_min/B, the perfect-scaling line through the smallest
    batch, and B_crit and B_simple marked."""
    fig, axes = pyplot().subplots(1, len(found), figsize=(5.2 * len(found), 4.2), squeeze=False)
    for ax, (model, summary) in zip(axes[0], found.items()):
        met = [r for r in summary["rows"] if r["best"] is not None]
        if not met:
            ax.set_title(f"{model}: the target was not met")
            continue
        bs, ss = [r["batch"] for r in met], [r["best"]["steps"] for r in met]
        seeds = [(r["batch"], t["best"]["steps"]) for r in met for t in r["seeds"] if t["best"]]
        if len(seeds) > len(met):
            ax.plot(*zip(*seeds), ".", color="C0", alpha=0.35, label="each seed (best rate)")
        ax.plot(bs, ss, "o", color="C0", label="the median seed")
        ax.plot(bs, [ss[0] * bs[0] / b for b in bs], ":", color="grey", label="perfect scaling")
        if "s_min" in summary:
            ax.plot(bs, [summary["s_min"] + summary["e_min"] / b for b in bs], "-",
                    label="S_min + E_min/B")
            ax.axvline(summary["b_crit"], color="C3", linestyle="--",
                       label=f"B_crit {summary['b_crit']:.0f}")
            if summary.get("b_simple"):
                ax.axvline(summary["b_simple"], color="C2", linestyle="-.",
                           label=f"B_simple {summary['b_simple']:.0f}")
        ax.set(xscale="log", yscale="log", xlabel="batch (rows)", ylabel="steps to the target",
               title=f"{model}: target {summary['target']:.3f}")
        batches_axis(ax)
    return finish(fig, out_path, list(axes[0]), dpi=130)


def plot_scaling(rows: list[dict], floor: float, out_path: str) -> str:
    """The held-out loss at a fixed number of examples against the batch: the rate scaled as
    the batch, and held at the base batch's; the source's floor beneath (log-scaled: a rate
    scaled too far diverges)."""
    fig, ax = pyplot().subplots(figsize=(6.4, 4.4))
    batches = [r["batch"] for r in rows]
    ax.plot(batches, [r["scaled"] for r in rows], "o-", label="rate ∝ batch (Goyal et al.)")
    ax.plot(batches, [r["fixed"] for r in rows], "s--", label="rate fixed")
    ax.axhline(floor, color="grey", linestyle=":", label=f"entropy floor {floor:.3f}")
    ax.set(xlabel="batch (rows), the same examples in all", ylabel="held-out loss (nats)",
           title="the linear scaling rule at a fixed number of examples", yscale="log")
    batches_axis(ax)
    return finish(fig, out_path, [ax], dpi=130)


def plot_fits(found: dict, budget_gib: float, out_path: str) -> str:
    """Per model, each layout's largest batch in the budget (bars), with the measured peak's
    share of what the estimate expected written beside it, or why it did not run."""
    fig, axes = pyplot().subplots(1, len(found), figsize=(5.2 * len(found), 3.8), squeeze=False)
    for ax, (model, summary) in zip(axes[0], found.items()):
        rows = summary["rows"][::-1]  # the first layout on top
        names = [f"{r['layout']} (N={r['ranks']})" for r in rows]
        colors = ["C0" if "peak" in r else "C3" for r in rows]
        ax.barh(names, [r["batch"] or 0 for r in rows], alpha=0.45, color=colors)
        for y, r in enumerate(rows):
            note = (f" {r['batch']:,} rows: {r['peak'] / 2**20:.0f} MiB measured, the "
                    f"estimate {r['error']:+.0%}" if "peak" in r else
                    f" {r.get('not_run') or 'not even the least batch fits'}"[:40])
            ax.text(0, y, note, va="center", fontsize=8)
        ax.set(xlabel="the largest batch (rows) a rank's memory holds",
               title=f"{model}: {budget_gib:g} GiB a rank")
    return finish(fig, out_path, list(axes[0]), dpi=130, legend=False, axis="x")


def batches_axis(ax) -> None:
    """Batches in powers of two along x, labelled as plain numbers."""
    from matplotlib.ticker import ScalarFormatter  # after pyplot(): matplotlib is there

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ScalarFormatter())
