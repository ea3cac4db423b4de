"""Draw the data-parallel benchmark JSON: weak-scaling efficiency against the per-rank batch."""

from __future__ import annotations

import json
from pathlib import Path

from ...jobs.harness import finish
from ...trace.figure import pyplot
from .driver import EFFICIENCY_TARGET, throughput_rows

LINES = {  # contender in the benchmark: (legend label, style), each against its driver.BASELINE
    "compute-only": ("compute only (no communication)", dict(color="0.5", marker=".", ls=":")),
    "naive": ("naive DP (one all-reduce per parameter)", dict(color="C1", marker="s")),
    "bucketed": ("bucketed, overlapped DP", dict(color="C0", marker="o")),
    "torch-ddp": ("torch DDP (gloo), against torch on one device",
                  dict(color="C3", marker="D", ls="--")),
}


def read_scaling(path: str | Path) -> tuple[dict, list[int], list[int]]:
    """({(n, contender): {per-rank batch: efficiency}}, world sizes, the MLP's layer sizes) from
    the compute MLP's sweep: the throughput table's efficiencies."""
    try:
        bench = json.loads(Path(path).read_text())
        results = {int(n): r for n, r in bench["per_world_size"].items()}
        rows = throughput_rows(results, bench["jobs"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path} is not a dp benchmark JSON ({type(e).__name__}: {e})") from e
    if not rows:
        raise ValueError(f"{path} has no world size or no compute MLP sweep")
    curves = {(n, c): {r["per-rank batch"]: r[f"efficiency n={n}"] for r in rows
                       if r["contender"] == c} for n in results for c in LINES}
    curves = {key: curve for key, curve in curves.items() if curve}  # torch's where it ran
    return curves, sorted(results), bench["configs"]["compute"]["sizes"]


def plot_scaling(path: str | Path, out: str | Path) -> Path:
    """Write a PNG: one panel per world size, efficiency of each contender vs per-rank batch."""
    curves, world_sizes, sizes = read_scaling(path)
    fig, axes = pyplot().subplots(1, len(world_sizes), figsize=(5.5 * len(world_sizes), 4.5),
                                  sharey=True, squeeze=False)
    for ax, n in zip(axes[0], world_sizes):
        for name, (label, style) in LINES.items():
            curve = curves.get((n, name))
            if curve:
                ax.plot(list(curve), list(curve.values()), label=label, **style)
        ax.axhline(EFFICIENCY_TARGET, color="k", lw=1, ls="--",
                   label=f"target {EFFICIENCY_TARGET:g} (at 2 ranks)")
        ax.axhline(1.0, color="0.7", lw=1)
        ax.set_xscale("log", base=2)
        batches = sorted({b for (m, _), c in curves.items() if m == n for b in c})
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.set(xlabel="samples per rank (compute per byte of gradient grows →)",
               title=f"n = {n} ranks" + (" (oversubscribed)" if n > 2 else ""))
    axes[0, 0].set_ylabel("weak-scaling efficiency t₁ / tₙ")
    axes[0, 0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Data parallelism, weak scaling: MLP {'-'.join(map(str, sizes))}, float32 SGD")
    return Path(finish(fig, out, axes[0], legend=False))
