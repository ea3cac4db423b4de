"""ZeRO's figures: bytes per rank by part against the paper's formula, and offload's step split."""

from __future__ import annotations

from ...jobs.harness import finish, stacked
from ...trace.figure import pyplot

PARTS = {"params": "#4c72b0", "grads": "#dd8452", "optim": "#55a868", "host": "#8172b3",
         "buckets": "#c44e52", "gathered": "#e5ae38", "scratch": "#999999"}  # column → color
SPLIT = {"forward": "#4c72b0", "backward + comm": "#dd8452", "copies": "#c44e52",
         "update": "#55a868"}


def bars(ax, x, rows: list[dict], colors: dict, width: float) -> None:
    """A bar at each of ``x``, one a row, stacked from the row's columns named in ``colors``,
    under the row's contender."""
    stacked(ax, x, [(key, color, [r[key] for r in rows]) for key, color in colors.items()], width)
    ax.set_xticks(list(x), [r["contender"].replace(" ", "\n") for r in rows], fontsize=8)


def plot_memory(memory: dict, model: str, out_path: str) -> str:
    """One panel per world size: per contender, rank 0's peak bytes stacked by part, and a
    dashed outline at the formula's parameters + gradients + optimizer + host."""
    ranks = sorted({r["N"] for r in memory["rows"]})
    fig, axes = pyplot().subplots(1, len(ranks), figsize=(1.5 + 6.5 * len(ranks), 5.6),
                                  squeeze=False, sharey=True)
    for ax, n in zip(axes[0], ranks):
        mine = [r for r in memory["rows"] if r["N"] == n]
        bars(ax, range(len(mine)), mine, PARTS, 0.6)
        formula = [sum(v for key, v in r.items() if key.startswith("f.")) for r in mine]
        ax.bar(range(len(mine)), formula, 0.8, fill=False, edgecolor="black", linestyle="--",
               linewidth=1.2, label="formula: params + grads + optim + host")
        ax.set_title(f"N = {n} ranks")
    axes[0][0].set_ylabel(f"peak per rank, rank 0 ({memory['unit']})")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=4,
               frameon=False, fontsize=8)
    fig.suptitle(f"ZeRO: bytes held per rank by part against the formula\n{model} "
                 "(activations, the same for all, not drawn)", fontsize=10)
    return finish(fig, out_path, axes[0], dpi=130, legend=False, rect=(0, 0.1, 1, 1), axis="y")


def plot_offload(steps: list[dict], ranks: int, out_path: str) -> str:
    """Per stage, the step without and with offload side by side, stacked: forward, backward
    with the collectives, the copies to and from the host, the update (rank 0's medians)."""
    mine = sorted((r for r in steps if r["N"] == ranks and r["contender"] != "DP"),
                  key=lambda r: r["contender"])  # ZeRO-1, ZeRO-1 offload, ZeRO-2…
    fig, ax = pyplot().subplots(figsize=(8, 4.6))
    bars(ax, [i + (i // 2) * 0.5 for i in range(len(mine))], mine, SPLIT, 0.8)  # pairs apart
    ax.set(ylabel="ms per step (rank 0, median)",
           title=f"ZeRO-Offload's step against the stage on the device, N = {ranks}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return finish(fig, out_path, [ax], dpi=130, legend=False, axis="y")
