"""The planner's validation drawn: predicted against measured, one point per layout."""

from __future__ import annotations

from pathlib import Path

from ...jobs.harness import finish
from ...trace.figure import pyplot

FAMILIES = {"dp": "#4c72b0", "dp-naive": "#4c72b0", "local-sgd": "#8172b3", "zero": "#55a868",
            "pipeline": "#dd8452", "hybrid": "#c44e52", "ps": "#937860", "hogwild": "#da8bc3",
            "easgd": "#8c8c8c"}
MARKERS = "os^DvPX*"  # one a world size, in the order they come
PANELS = (("s", "ms", 1e3, "step time"),  # (unit, shown as, scale, title)
          ("bytes", "MiB", 2**-20, "peak memory of the largest rank (traced)"))


def draw(directory: str, rows: list[dict]) -> list[str]:
    """plan_validation.png: of each layout that ran, step time and peak memory, predicted (y)
    against measured (x), log-log, colour by family and marker by world size (the memory of
    real compute only), with y = x and the ±25% band of the step's target."""
    rows = [r for r in rows if r["step_error"] is not None]
    fig, axes = pyplot().subplots(1, 2, figsize=(12, 5.4))
    worlds = sorted({r["ranks"] for r in rows})
    for ax, (unit, shown, scale, title) in zip(axes, PANELS):
        ran = [r for r in rows if r.get(f"measured_{unit}") is not None]  # a stand-in's memory
        if not ran:
            ax.text(0.5, 0.5, f"nothing measured: {title}", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_axis_off()
            continue
        points = [(scale * r[f"measured_{unit}"], scale * r[f"predicted_{unit}"]) for r in ran]
        for family, color in FAMILIES.items():
            for n, marker in zip(worlds, MARKERS):
                mine = [xy for xy, r in zip(points, ran)
                        if r["strategy"] == family and r["ranks"] == n]
                if mine:
                    ax.scatter(*zip(*mine), color=color, marker=marker, s=28, alpha=0.8,
                               label=f"{family}, N = {n}")
        low, high = min(map(min, points)) / 1.3, max(map(max, points)) * 1.3
        ax.plot([low, high], [low, high], color="black", linewidth=1, label="predicted = measured")
        if unit == "s":
            ax.fill_between([low, high], [0.75 * low, 0.75 * high], [1.25 * low, 1.25 * high],
                            color="grey", alpha=0.15, label="±25%")
        ax.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high), title=title,
               xlabel=f"measured ({shown})", ylabel=f"predicted ({shown})")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="center right", frameon=False,
               fontsize=7)  # each label once: the step's panel scatters each group once
    fig.suptitle("the planner against this machine: every layout of the run", fontsize=10)
    return [finish(fig, str(Path(directory) / "plan_validation.png"), axes, dpi=130,
                   legend=False, rect=(0, 0, 0.82, 1))]
