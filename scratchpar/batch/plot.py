"""The batch-size measurements drawn."""

from __future__ import annotations

from ..bench.harness import finish
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
    ax.set_xscale("log", base=2)
    from matplotlib.ticker import ScalarFormatter  # after pyplot(): matplotlib is there

    ax.xaxis.set_major_formatter(ScalarFormatter())
    return finish(fig, out_path, [ax], dpi=130)
