"""ZeRO's figures: bytes per rank by part against the paper's formula, and offload's step split."""

from __future__ import annotations

from ...jobs.harness import finish, stacked
from ...parallel.zero.formula import PARTS as FORMULA_PARTS
from ...trace.figure import pyplot

PARTS = {"parameters": "#4c72b0", "gradients": "#dd8452", "optimizer": "#55a868",
         "host": "#8172b3", "buckets": "#c44e52", "gathered": "#e5ae38", "scratch": "#999999"}
SPLIT = {"forward_ms": ("forward", "#4c72b0"), "rest_ms": ("backward + comm", "#dd8452"),
         "copy_ms": ("copies to/from host", "#c44e52"), "update_ms": ("update", "#55a868")}


def plot_memory(rows: list[dict], unit: tuple[str, int], model: str, out_path: str) -> str:
    """One panel per world size: per contender, rank 0's peak bytes stacked by part, and a
    dashed outline at the formula's parameters + gradients + optimizer + host."""
    name, scale = unit
    ranks = sorted({r["ranks"] for r in rows})
    fig, axes = pyplot().subplots(1, len(ranks), figsize=(1.5 + 6.5 * len(ranks), 5.6),
                                  squeeze=False, sharey=True)
    for ax, n in zip(axes[0], ranks):
        mine = [r for r in rows if r["ranks"] == n]
        x = range(len(mine))
        stacked(ax, x, [(part, color, [r[part] / scale for r in mine])
                        for part, color in PARTS.items()], 0.6)
        ax.bar(x, [sum(r[f"formula_{p}"] for p in FORMULA_PARTS) / scale for r in mine], 0.8,
               fill=False, edgecolor="black", linestyle="--", linewidth=1.2,
               label="formula: params + grads + optim + host")
        ax.set_xticks(list(x), [r["label"].replace(" ", "\n") for r in mine], fontsize=8)
        ax.set_title(f"N = {n} ranks")
    axes[0][0].set_ylabel(f"peak per rank, rank 0 ({name})")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=4,
               frameon=False, fontsize=8)
    fig.suptitle(f"ZeRO: bytes held per rank by part against the formula\n{model} "
                 "(activations, the same for all, not drawn)", fontsize=10)
    return finish(fig, out_path, axes[0], dpi=130, legend=False, rect=(0, 0.1, 1, 1), axis="y")


def plot_offload(rows: list[dict], ranks: int, out_path: str) -> str:
    """Per stage, the step without and with offload side by side, stacked: forward, backward
    with the collectives, the copies to and from the host, the update (rank 0's medians)."""
    mine = [r for r in rows if r["ranks"] == ranks]
    fig, ax = pyplot().subplots(figsize=(8, 4.6))
    x = [i + (i // 2) * 0.5 for i in range(len(mine))]  # a gap between the stages' pairs
    stacked(ax, x, [(label, color, [r[key] for r in mine])
                    for key, (label, color) in SPLIT.items()], 0.8)
    ax.set_xticks(x, [r["label"].replace(" offload", "\noffload") for r in mine])
    ax.set(ylabel="ms per step (rank 0, median)",
           title=f"ZeRO-Offload's step against the stage on the device, N = {ranks}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return finish(fig, out_path, [ax], dpi=130, legend=False, axis="y")
