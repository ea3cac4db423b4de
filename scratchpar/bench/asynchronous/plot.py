"""The asynchronous benchmark's figures: Hogwild, EASGD against Downpour, round-robin."""

from __future__ import annotations

import math
from pathlib import Path

from ...jobs.harness import finish, stacked
from ...trace.figure import pyplot

CURVES = (("hogwild", "× 1 proc", "Hogwild", {"marker": "o"}),
          ("hogwild", "× serial loop", "Hogwild over the serial loop",
           {"marker": ".", "ls": ":", "alpha": 0.5}),
          ("locked", "× 1 proc", "locked", {"marker": "x", "ls": "", "ms": 9, "mew": 2}))
BARS = {"colliding writes": "writes with a colliding row",
        "colliding coordinates": "coordinates in colliding rows"}
SHARES = {"pack": "pack (busy)", "update": "eq. 4 update (busy)", "wait": "wait for the worker",
          "other": "other"}  # the round-robin master's wall time


def draw(directory: str, parts: dict, rows: dict, medians: dict) -> list[str]:
    """The four figures, drawn from the rows and each part's median runs: their paths."""
    out = Path(directory)
    return [speedup(rows, out / "async_hogwild_speedup.png"),
            hogwild_loss(rows["hogwild"], medians, parts["hogwild"],
                         out / "async_hogwild_loss.png"),
            easgd_tau(parts["tau"], [r["τ"] for r in rows["tau"]], out / "async_easgd_tau.png"),
            round_robin(rows["round_robin"], out / "async_round_robin_busy.png")]


def speedup(rows: dict, out: Path) -> str:
    """The PNG's path. Left: the speed-ups over Hogwild ×1 (serial SGD) against P per problem,
    the ideal P dashed, the target dotted. Right: the shares of colliding writes per problem."""
    hogwild, collisions, target = rows["hogwild"], rows["collisions"], rows["verdict"]["target"]
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(12, 4.5))
    for i, problem in enumerate(dict.fromkeys(r["problem"] for r in hogwild)):
        for mode, column, label, style in CURVES:
            points = [(r["P"], r[column]) for r in hogwild
                      if r["problem"] == problem and r["contender"].startswith(mode)]
            if points:
                left.plot(*zip(*points), color=f"C{i}", label=f"{problem}: {label}", **style)
    counts = sorted({r["P"] for r in hogwild})
    left.plot([1, counts[-1]], [1, counts[-1]], "--", color="0.5", lw=1, label="ideal: P×")
    left.axhline(target, color="C3", ls=":", lw=1, label=f"target {target}× at P = 2 (sparse)")
    left.set(xlabel="processes P", xticks=counts, ylim=(0, None),
             ylabel="speed-up over Hogwild ×1 = serial SGD (same updates)",
             title="Hogwild's speed-up, updates per second")
    for i, (key, label) in enumerate(BARS.items()):
        right.bar([j + 0.4 * i - 0.2 for j in range(len(collisions))],
                  [c[key] for c in collisions], 0.4, color=f"C{i}", label=label)
    right.set_xticks(range(len(collisions)),
                     [f"{c['problem']}\nP = {c['P']}" for c in collisions], fontsize=8)
    right.set(ylim=(0, 1), ylabel="share")
    right.set_title("colliding writes (another worker wrote a row between read and write)",
                    fontsize=10)
    left.legend(frameon=False, fontsize=7, loc="upper left")
    right.legend(frameon=False, fontsize=8)
    return finish(fig, out, (left, right), legend=False)


def hogwild_loss(rows: list[dict], medians: dict, part: dict, out: Path) -> str:
    """The PNG's path: per problem, held-out loss against seconds of each contender's median
    run, the problem's floor dashed and the target loss dotted."""
    levels = {r["problem"]: r["target"] for r in rows}
    fig, axes = pyplot().subplots(1, len(medians), figsize=(5 * len(medians), 4), squeeze=False)
    for ax, (problem, runs) in zip(axes[0], medians.items()):
        for i, (name, run) in enumerate(runs.items()):
            seconds, _, losses = zip(*run["curve"])
            ax.plot(seconds, losses, "--" if name.startswith("locked") else "-", color=f"C{i}",
                    marker=".", ms=3, label=name)
        ax.axhline(levels[problem], color="0.5", ls=":", lw=1, label="target")
        floor = part[problem]["floor"]
        if floor is not None:
            ax.axhline(floor, color="k", ls="--", lw=1, label=f"floor {floor:.3f}")
        ax.set(title=problem, xlabel="wall-clock seconds")
    axes[0, 0].set_ylabel("held-out loss per sample")
    fig.suptitle("held-out loss of θ against wall-clock: serial SGD, Hogwild, locked "
                 "(the same updates)", fontsize=10)
    return finish(fig, out, axes[0])


def easgd_tau(part: dict, taus: list[int], out: Path) -> str:
    """The PNG's path: per τ, held-out loss of the master's parameters against steps, EASGD and
    Downpour (log scale: Downpour's blow-ups are orders of magnitude)."""
    fig, axes = pyplot().subplots(1, len(taus), figsize=(3.6 * len(taus) + 1, 3.8), sharey=True,
                                  squeeze=False)
    for ax, tau in zip(axes[0], taus):
        for i, method in enumerate(("EASGD", "Downpour")):
            points = [(k, loss if math.isfinite(loss) else math.nan)
                      for _, k, loss in part["runs"][f"{method} {tau}"]["curve"]]
            ax.plot(*zip(*points), "o-", color=f"C{i}", ms=3, label=method)
        if part["floor"] > 0:
            ax.axhline(part["floor"], color="k", ls="--", lw=1, label=f"floor {part['floor']:.3f}")
        ax.set(yscale="log", title=f"τ = {tau}", xlabel="steps per worker")
    axes[0, 0].set_ylabel("held-out loss (master's parameters)")
    axes[0, 0].legend(frameon=False, fontsize=8)
    fig.suptitle("asynchronous EASGD against Downpour as the communication period τ grows "
                 "(same data, rate and start)", fontsize=10)
    return finish(fig, out, axes[0], legend=False, which="both")


def round_robin(rows: list[dict], out: Path) -> str:
    """The PNG's path. Left: the master's wall time per run as stacked shares. Right: steps per
    second against the workers G, real compute and stand-in."""
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(12, 4.2))
    stacked(left, [f"G = {r['G']}\n{r['compute']}" for r in rows],
            [(label, f"C{i}", [max(r[key], 0.0) for r in rows])
             for i, (key, label) in enumerate(SHARES.items())], 0.6)
    left.set(ylim=(0, 1), ylabel="share of the master's wall time",
             title="round-robin EASGD: where the master's time goes")
    for i, compute in enumerate(("real", "stand-in")):
        points = sorted((r["G"], r["steps/s"]) for r in rows if r["compute"] == compute)
        right.plot(*zip(*points), "o-" if compute == "stand-in" else "s", ms=8, color=f"C{i}",
                   label=f"{compute} compute")
    right.set(xlabel="workers G", xticks=sorted({r["G"] for r in rows}), ylim=(0, None),
              ylabel="steps per second", title="throughput: one worker computes at a time")
    return finish(fig, out, (left, right), axis="y")
