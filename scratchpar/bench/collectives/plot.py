"""Draw the collectives benchmark JSON: time relative to MPI_Allreduce, bus bandwidth vs size."""

from __future__ import annotations

import json
from pathlib import Path

from ...jobs.harness import finish
from ...trace.figure import pyplot
from .driver import BUSBW_OF_MEMCPY, human

MPI_DEFAULT = "MPI_Allreduce (MPICH default)"
LINES = {  # algorithm in the benchmark's table → legend label, matplotlib style
    "ring": ("ring", dict(color="C0", marker="o")),
    "recursive_doubling": ("recursive doubling", dict(color="C1", marker="s")),
    "rabenseifner": ("Rabenseifner", dict(color="C4", marker="v")),
    "tree": ("tree", dict(color="C2", marker="^")),
    "mpi-ring": ("MPI_Allreduce (MPICH ring)", dict(color="C3", marker="D", ls="--")),
    "auto": ("auto (doubling, then ring above the crossover)",
             dict(color="k", marker="x", ls="none", ms=9)),
    "mpi": (MPI_DEFAULT, dict(color="0.4", marker=".")),  # on top, the line at 1
}
UNDRAWN = {("auto", "busbw_gbs"), ("mpi", "x_mpi")}  # (algorithm, the panel's column)


def read_bench(path: str | Path) -> tuple[dict, list[int], float]:
    """({(n, algorithm): {bytes: table row}}, sizes in bytes, memcpy bandwidth in GB/s)."""
    try:
        bench = json.loads(Path(path).read_text())
        sizes = bench["sizes"]
        nbytes = {human(s): s for s in sizes}
        rows = {}
        for row in bench["table"]:
            rows.setdefault((row["n"], row["algorithm"]), {})[nbytes[row["size"]]] = row
        memcpy_gbs = bench["memcpy"]["bytes"] / bench["memcpy"]["seconds"] / 1e9
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a collectives benchmark JSON "
                         f"({type(e).__name__}: {e})") from e
    return rows, sizes, memcpy_gbs


def plot_collectives(path: str | Path, out: str | Path) -> Path:
    """Write a PNG: per world size, time / MPI's default (top) and bus bandwidth (bottom)."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter, LogLocator

    rows, sizes, memcpy_gbs = read_bench(path)
    world_sizes = sorted({n for n, _ in rows})
    if not world_sizes:
        raise ValueError(f"{path} holds no table rows")
    fig, axes = plt.subplots(2, len(world_sizes), figsize=(11, 7.5), sharex=True, squeeze=False)
    for n, (ratio, bw) in zip(world_sizes, axes.T):
        for name, (label, style) in LINES.items():
            per = rows.get((n, name), {})
            xs = [s for s in sizes if s in per]
            for ax, key in ((ratio, "x_mpi"), (bw, "busbw_gbs")):
                if (name, key) not in UNDRAWN:
                    ax.plot(xs, [per[s][key] for s in xs], label=label, **style)
        ratio.axhline(1.0, color="0.4", lw=1.5, label=MPI_DEFAULT)
        bw.axhline(memcpy_gbs, color="k", ls="--", lw=1,
                   label=f"memcpy, 1 process ({memcpy_gbs:.1f} GB/s)")
        bw.axhline(BUSBW_OF_MEMCPY * memcpy_gbs, color="k", ls=":", lw=1,
                   label=f"target: {BUSBW_OF_MEMCPY:g} × memcpy")
        ratio.set_yscale("log", base=2)
        ratio.set(title=f"n = {n} ranks", ylabel="time / MPI_Allreduce default\n(lower is better)")
        bw.set(yscale="log", ylabel="bus bandwidth, GB/s\n(higher is better)",
               xlabel="message size (float32 sum all-reduce)")
        bw.set_xscale("log", base=2)
        bw.set_xticks(sizes, [human(s) for s in sizes], rotation=45)
        for ax in (ratio, bw):
            ax.yaxis.set_major_locator(LogLocator(base=ax.yaxis.get_transform().base))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.minorticks_off()
    handles = {label: h for ax in axes[:, 0] for h, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=4, fontsize=9)
    fig.suptitle("Hand-written all-reduce vs MPICH's MPI_Allreduce (one machine)")
    return Path(finish(fig, out, axes.ravel(), legend=False, rect=(0, 0.09, 1, 1)))
