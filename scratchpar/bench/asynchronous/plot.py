"""The asynchronous benchmark's figures: Hogwild, EASGD against Downpour, round-robin."""

from __future__ import annotations

import math

from ...jobs.harness import finish, stacked
from ...trace.figure import pyplot


def plot_speedup(rows: list[dict], collisions: list[dict], target: float, out_path: str) -> str:
    """Left: updates per second over Hogwild's at 1 process (serial SGD) against processes, per
    problem (Hogwild as lines, over the plain serial loop faint, the locked variant as
    crosses), the ideal P dashed and the target dotted. Right: the share of colliding writes
    and of colliding coordinates per problem and P."""
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(12, 4.5))
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    for i, problem in enumerate(problems):
        mine = [r for r in rows if r["problem"] == problem]
        wild = [r for r in mine if r["key"].startswith("hog")]
        locked = sorted((r["processes"], r["vs_one"]) for r in mine
                        if r["key"].startswith("locked"))
        left.plot([r["processes"] for r in wild], [r["vs_one"] for r in wild], "o-",
                  color=f"C{i}", label=f"{problem}: Hogwild")
        left.plot([r["processes"] for r in wild], [r["vs_loop"] for r in wild], ".:",
                  color=f"C{i}", alpha=0.5, label=f"{problem}: Hogwild over the serial loop")
        if locked:
            left.plot(*zip(*locked), "x", color=f"C{i}", ms=9, mew=2, label=f"{problem}: locked")
    top = max(r["processes"] for r in rows)
    left.plot([1, top], [1, top], "--", color="0.5", lw=1, label="ideal: P×")
    left.axhline(target, color="C3", ls=":", lw=1, label=f"target {target}× at P = 2 (sparse)")
    left.set(xlabel="processes P", xticks=sorted({r["processes"] for r in rows}), ylim=(0, None),
             ylabel="speed-up over Hogwild ×1 = serial SGD (same updates)",
             title="Hogwild's speed-up, updates per second")
    labels = [f"{c['problem']}\nP = {c['processes']}" for c in collisions]
    x = range(len(collisions))
    right.bar([i - 0.2 for i in x], [c["colliding"] for c in collisions], 0.4, color="C0",
              label="writes with a colliding row")
    right.bar([i + 0.2 for i in x], [c["colliding_coordinates"] for c in collisions], 0.4,
              color="C1", label="coordinates in colliding rows")
    right.set_xticks(list(x), labels, fontsize=8)
    right.set(ylim=(0, 1), ylabel="share")
    right.set_title("colliding writes (another worker wrote a row between read and write)",
                    fontsize=10)
    left.legend(frameon=False, fontsize=7, loc="upper left")
    right.legend(frameon=False, fontsize=8)
    return finish(fig, out_path, (left, right), legend=False)


def plot_hogwild_loss(curves: dict, floors: dict, levels: dict, out_path: str) -> str:
    """One panel per problem: held-out loss of θ against wall-clock seconds, one line per
    contender; the problem's floor dashed and the target loss dotted."""
    fig, axes = pyplot().subplots(1, len(curves), figsize=(5 * len(curves), 4), squeeze=False)
    for ax, (problem, runs) in zip(axes[0], curves.items()):
        for i, (name, points) in enumerate(runs.items()):
            ax.plot(*zip(*points), "-" if name.startswith(("serial", "hog")) else "--",
                    color=f"C{i}", marker=".", ms=3, label=name)
        ax.axhline(levels[problem], color="0.5", ls=":", lw=1, label="target")
        if floors[problem] is not None:
            ax.axhline(floors[problem], color="k", ls="--", lw=1,
                       label=f"floor {floors[problem]:.3f}")
        ax.set(title=problem, xlabel="wall-clock seconds")
    axes[0, 0].set_ylabel("held-out loss per sample")
    fig.suptitle("held-out loss of θ against wall-clock: serial SGD, Hogwild, locked "
                 "(the same updates)", fontsize=10)
    return finish(fig, out_path, axes[0])


def plot_easgd_tau(runs: dict, taus: list[int], floor: float, out_path: str) -> str:
    """One panel per τ: held-out loss of the master's parameters against steps, EASGD and
    Downpour (log scale: Downpour's blow-ups are orders of magnitude)."""
    fig, axes = pyplot().subplots(1, len(taus), figsize=(3.6 * len(taus) + 1, 3.8), sharey=True,
                                  squeeze=False)
    for ax, tau in zip(axes[0], taus):
        for i, (method, label) in enumerate((("easgd", "EASGD"), ("downpour", "Downpour"))):
            points = [(k, loss if math.isfinite(loss) else float("nan"))
                      for k, loss in runs[f"{method} {tau}"]["curve"]]
            ax.plot(*zip(*points), "o-", color=f"C{i}", ms=3, label=label)
        if floor > 0:
            ax.axhline(floor, color="k", ls="--", lw=1, label=f"floor {floor:.3f}")
        ax.set(yscale="log", title=f"τ = {tau}", xlabel="steps per worker")
    axes[0, 0].set_ylabel("held-out loss (master's parameters)")
    axes[0, 0].legend(frameon=False, fontsize=8)
    fig.suptitle("asynchronous EASGD against Downpour as the communication period τ grows "
                 "(same data, rate and start)", fontsize=10)
    return finish(fig, out_path, axes[0], legend=False, which="both")


def plot_round_robin(rows: list[dict], out_path: str) -> str:
    """Left: the master's wall time per run as stacked shares (pack, update, wait, other).
    Right: steps per second against the workers G, real compute and stand-in."""
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(12, 4.2))
    stacked(left, [f"G = {r['workers']}\n{r['compute']}" for r in rows],
            [(name, f"C{i}", [max(r[key], 0.0) for r in rows]) for i, (key, name) in enumerate(
                (("pack", "pack (busy)"), ("update", "eq. 4 update (busy)"),
                 ("wait", "wait for the worker"), ("other", "other")))], 0.6)
    left.set(ylim=(0, 1), ylabel="share of the master's wall time",
             title="round-robin EASGD: where the master's time goes")
    for i, compute in enumerate(("real", "stand-in")):
        points = sorted((r["workers"], r["steps_per_s"]) for r in rows if r["compute"] == compute)
        if points:
            right.plot(*zip(*points), "o-" if compute == "stand-in" else "s", ms=8,
                       color=f"C{i}", label=f"{compute} compute")
    right.set(xlabel="workers G", xticks=sorted({r["workers"] for r in rows}), ylim=(0, None),
              ylabel="steps per second", title="throughput: one worker computes at a time")
    return finish(fig, out_path, (left, right), axis="y")
