"""Pipeline plots: a schedule's ideal timeline beside a measured one, and bubbles against m."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .chrome import read_regions
from .figure import pyplot, save

if TYPE_CHECKING:
    from scratchpar.parallel.pipeline.simulator import Timeline

COLORS = {"F": "#4c72b0", "B": "#dd8452", "W": "#55a868", "STEP": "#999999"}
COMPUTE = re.compile(r"(?:([FBW])(\d+)(?:\.(\d+))?|STEP(?: \d+)?)$")  # F3, B3.1, W3, STEP, STEP 3

Rows = dict[int, list[tuple[str, float, float]]]


def kind(label: str) -> str:
    """``F``, ``B``, ``W`` or ``STEP``, from a label such as ``B3.1`` or ``STEP 3``."""
    return "STEP" if label.startswith("STEP") else label[0]


def shade(label: str) -> float:
    """Opacity of a bar: later model chunks (``F3.1``, ``F3.2``, …) lighter."""
    chunk = COMPUTE.match(label)
    return max(0.4, 1 - 0.25 * int(chunk[3])) if chunk and chunk[3] else 1.0


def gantt(ax, rows: Rows, title: str) -> None:
    """A row per rank (rank 0 on top), a bar per (label, start, end), colored by kind and
    lighter for later chunks. A bar wide enough for it carries its micro-batch (and chunk)."""
    end = max((e for spans in rows.values() for _, _, e in spans), default=1.0) or 1.0
    for rank, spans in rows.items():
        for label, start, stop in spans:
            ax.broken_barh([(start, stop - start)], (rank - 0.4, 0.8),
                           facecolors=COLORS[kind(label)], alpha=shade(label),
                           edgecolors="white", linewidth=0.5)
            text = label[len(kind(label)):].strip()
            if text and (stop - start) / end > 0.012 * len(text):
                ax.text((start + stop) / 2, rank, text, ha="center", va="center", fontsize=7,
                        color="white")
    ranks = sorted(rows)
    ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
    ax.set_ylim(max(ranks, default=0) + 0.5, -0.5)  # rank 0 on top
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)


def ideal_spans(timeline: Timeline) -> Rows:
    """The computes and STEPs of a simulated timeline, as gantt rows."""
    return {r: [(str(s.action), s.start, s.end) for s in spans if not s.action.is_comm]
            for r, spans in timeline.spans.items()}


def measured_spans(trace_path: str) -> Rows:
    """The regions of a Chrome trace named like pipeline computes (``F3``, ``B3.1``, ``W3``,
    ``STEP``), per rank (pid), in ms from the trace's aligned zero."""
    rows: Rows = {}
    for e in read_regions(trace_path):
        if COMPUTE.match(e["name"]):
            rows.setdefault(e["pid"], []).append(
                (e["name"], e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3))
    return rows


def plot_pipeline_timeline(ideal: Timeline, out_path: str, measured: Rows | None = None,
                           title: str = "") -> str:
    """The simulator's ideal timeline on top and, if given, the measured spans below."""
    plt = pyplot()
    from matplotlib.patches import Patch

    panels = [(ideal_spans(ideal), f"simulated: bubble {ideal.bubble:.1%} (time in the "
                                   f"simulator's cost units)")]
    if measured:
        panels.append((measured, "measured (ms)"))
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(14, sum(0.45 * len(rows) + 1.2 for rows, _ in panels)))
    for ax, (rows, caption) in zip(axes[:, 0], panels):
        gantt(ax, rows, caption)
    fig.suptitle(title or f"pipeline schedule: p={ideal.p}, m={ideal.m}, v={ideal.v}")
    axes[0, 0].legend(handles=[Patch(color=c, label=k) for k, c in COLORS.items()],
                      loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    return str(save(fig, out_path, dpi=110))


def plot_trace_stages(trace_path: str, out_path: str) -> str:
    """Each rank's pipeline computes in a trace written by ``scratchpar.train --trace``."""
    rows = measured_spans(trace_path)
    if not rows:
        raise ValueError(f"{trace_path} has no pipeline computes (F3, B3, …) to draw: was it "
                         "written by --strategy pipeline?")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(14, 0.45 * len(rows) + 1.4))
    gantt(ax, rows, "measured pipeline timeline (ms since the aligned start)")
    fig.tight_layout()
    return str(save(fig, out_path, dpi=110))


def plot_bubble_curve(rows: list[dict], out_path: str) -> str:
    """Bubble fraction against micro-batches m (log₂ axis): one solid line per (schedule, p)
    from the measured ``bubble``, and its ``formula`` dashed in the same color."""
    if not rows:
        raise ValueError("no bubble measurements to draw")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    curves = sorted({(r["schedule"], r["p"]) for r in rows})
    for i, (schedule, p) in enumerate(curves):
        points = sorted((r["m"], r["bubble"], r["formula"]) for r in rows
                        if (r["schedule"], r["p"]) == (schedule, p))
        ms = [m for m, _, _ in points]
        ax.plot(ms, [b for _, b, _ in points], marker="o", color=f"C{i}",
                label=f"{schedule}, p={p}")
        ax.plot(ms, [f for _, _, f in points], ls="--", color=f"C{i}")
    ax.plot([], [], ls="--", color="0.4", label="formula")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("micro-batches m")
    ax.set_ylabel("bubble (idle fraction)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=8)
    ax.set_title("pipeline bubble: measured against the formula")
    fig.tight_layout()
    return str(save(fig, out_path, dpi=120))
