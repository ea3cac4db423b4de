"""Per-rank timeline of a Chrome trace: a row per lane (compute, comm, …), a bar per region."""

from __future__ import annotations

from .chrome import LANES, read_regions
from .figure import pyplot, save

COLORS = {"forward": "#4c72b0", "backward": "#dd8452", "optimizer": "#55a868",
          "all_reduce": "#c44e52", "broadcast": "#8172b3",
          # the parameter servers' regions (parallel/ps): a worker's step, its waits, the update
          "forward+backward": "#4c72b0", "pull": "#c44e52", "push": "#937860",
          "update": "#55a868", "slowed": "#e5ae38",
          # ZeRO's (parallel/zero): its collectives, its refresh, a stage-3 group's residency
          "all_gather": "#8c613c", "reduce_scatter": "#da8bc3", "gather parameters": "#64b5cd",
          "gathered": "#ccb974"}
OTHER = "#999999"


def kind(name: str) -> str:
    """The region's kind: its name up to the algorithm ("all_reduce/ring" → "all_reduce"),
    or "gathered" for a ZeRO-3 group's residency ("layer 2 gathered", "root gathered")."""
    head = name.split("/")[0]
    return "gathered" if head.endswith(" gathered") else head


def lane_order(cat: str) -> tuple:
    """compute, comm, then other categories by name."""
    return (LANES.index(cat) if cat in LANES else len(LANES)), cat


def plot_timeline(trace_path: str, out_path: str, title: str | None = None) -> str:
    """Draw every rank's lanes from ``trace_path`` (time in ms from the aligned zero)."""
    plt = pyplot()
    from matplotlib.patches import Patch

    regions = read_regions(trace_path)
    if not regions:
        raise ValueError(f"{trace_path} has no regions to draw")
    rows = sorted({(e["pid"], e["cat"]) for e in regions},
                  key=lambda row: (row[0], lane_order(row[1])))
    y = {row: i for i, row in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(14, 0.5 * len(rows) + 1.6))
    for e in regions:  # collectives in flight together overlap: translucent, so they darken
        color = COLORS.get(kind(e["name"]), OTHER)
        ax.broken_barh([(e["ts"] / 1e3, e["dur"] / 1e3)], (y[(e["pid"], e["cat"])] - 0.4, 0.8),
                       facecolors=color, edgecolors="none",
                       alpha=1.0 if e["cat"] == "compute" else 0.35)
    ax.set_yticks(range(len(rows)), [f"rank {pid} · {cat}" for pid, cat in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)  # rank 0 on top
    for i in range(1, len(rows)):
        if rows[i][0] != rows[i - 1][0]:
            ax.axhline(i - 0.5, color="black", linewidth=0.6)
    ax.set_xlabel("time since the aligned start (ms)")
    ax.set_title(title or "per-rank timeline: compute and communication regions")
    ax.grid(axis="x", alpha=0.3)
    kinds = {kind(e["name"]) for e in regions}
    keys = [(k, c) for k, c in COLORS.items() if k in kinds]
    keys += [("other", OTHER)] if kinds - COLORS.keys() else []
    ax.legend(handles=[Patch(color=c, label=k) for k, c in keys],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    return str(save(fig, out_path, dpi=130))
