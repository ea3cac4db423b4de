"""The parameter-server benchmark's figures: bytes, staleness, and loss against wall-clock."""

from __future__ import annotations

from ...jobs.harness import finish
from ...trace.figure import pyplot
from ...trace.timeline_plot import plot_timeline

CAPTIONS = {"sync": "synchronous: SSP τ = 0, update for update the synchronous server",
            "ssp1": "SSP τ = 1", "async": "asynchronous (Downpour, τ = ∞)"}  # of each timeline


def draw(directory: str, rows: dict, curves: dict, floor: float, levels: list[float],
         cfgs: dict) -> list[str]:
    """The three figures (part 3's ``curves``) and part 2's three timelines, from the traces
    its workers wrote into ``directory``: the paths."""
    stale, out = cfgs["staleness"], f"{directory}/ps_"
    paths = [plot_bottleneck(rows["bytes"], rows["speed"], cfgs["bottleneck"]["steps"],
                             f"{out}bottleneck.png"),
             plot_staleness(rows["staleness"], stale["contenders"], f"{out}staleness.png"),
             plot_loss_time(curves, floor, levels, f"{out}loss_time.png")]
    s, w = stale["servers"], stale["workers"]
    roles = f"{s} server, ranks {s}–{s + w - 1} work, rank {s} slowed 2× (extra sleep: 'slowed')"
    for name, caption in CAPTIONS.items():
        paths.append(plot_timeline(f"{out}timeline_{name}.trace.json",
                                   f"{out}timeline_{name}.png", f"{caption}: {roles}"))
    return paths


def plot_bottleneck(moved: list[dict], speed: list[dict], steps: int, out_path: str) -> str:
    """Left: MB per step through the busiest server (measured, and the protocol's count dashed)
    and through one rank of the ring all-reduce (counted, and 2·2(P−1)/P·K·b dashed) against
    the workers W; S = 1 as lines, S = 2 as squares. Right: steps per second against ranks."""
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(12, 4.5))
    one = sorted((r for r in moved if r["S"] == 1), key=lambda r: r["W"])
    two = [r for r in moved if r["S"] == 2]
    for rows, key, per, style, color, label in (
            (one, "server MB/step", 1, "o-", "C3", "busiest server, S = 1 (measured)"),
            (one, "protocol B", 1e-6 / steps, "--", "C3", "protocol: W·(2·K·b + header)"),
            (one, "ring MB/step", 1, "o-", "C0",
             "ring all-reduce, one rank of P = W + 1 (counted)"),
            (one, "2·2(P−1)/P·K·b", 1e-6, "--", "C0", "ring: 2·2(P−1)/P·K·b"),
            (two, "server MB/step", 1, "s", "C1", "busiest of S = 2 servers (measured)")):
        if rows:
            left.plot([r["W"] for r in rows], [r[key] * per for r in rows], style, color=color,
                      ms=8 if style == "s" else 6, label=label)
    left.set(xlabel="workers W", xticks=sorted({r["W"] for r in moved}),
             ylabel="MB per step (received + sent)", ylim=(0, None),
             title="the server as the bottleneck: bytes through one rank per step")
    for name, style, label in (("sync S=1", "o-", "synchronous PS, S=1"),
                               ("sync S=2", "s", "synchronous PS, S=2"),
                               ("dp", "o-", "DataParallel (ring)")):
        points = sorted((r["ranks"], r["steps/s"]) for r in speed if r["contender"] == name)
        if points:
            right.plot(*zip(*points), style, ms=8 if style == "s" else 6, label=label)
    right.set(xlabel="ranks (PS: S servers + W workers; DP: every rank computes)",
              xticks=sorted({r["ranks"] for r in speed}), ylim=(0, None),
              ylabel="steps per second (same global batch)",
              title="step throughput, same model and ranks")
    return finish(fig, out_path, (left, right))


def plot_staleness(rows: dict, contenders: list[dict], out_path: str) -> str:
    """One panel per contender: pushes applied at each staleness (in updates), the bound τ
    dashed where there is one."""
    fig, axes = pyplot().subplots(1, len(rows), figsize=(2.6 * len(rows) + 1, 3.4), sharey=True,
                                  squeeze=False)
    top = max(int(s) for r in rows.values() for s in r["histogram"]) + 1  # JSON: str keys
    for ax, c in zip(axes[0], contenders):
        r = rows[c["name"]]
        ax.bar(list(map(int, r["histogram"])), list(r["histogram"].values()), color="C0",
               width=0.8)
        if "staleness" in c:
            ax.axvline(c["staleness"] + 0.5, color="C3", ls="--", lw=1)
        ax.set_title(f"{r['contender']}\nmean {r['stale mean']:.2f}, max {r['stale max']}",
                     fontsize=9)
        ax.set(xticks=range(top), xlim=(-0.6, top - 0.4), xlabel="staleness (updates)")
    axes[0, 0].set_ylabel("pushes")
    fig.suptitle("staleness of each push when applied, one worker slowed 2× "
                 "(dashed: the bound τ)", fontsize=10)
    return finish(fig, out_path, axes[0], legend=False, axis="y")


def plot_loss_time(curves: dict, floor: float | None, levels: list[float], out_path: str) -> str:
    """Held-out loss (markers) and server 0's training loss per clock (faint) against
    seconds, one color per contender; the loss levels dotted and the entropy floor dashed."""
    fig, ax = pyplot().subplots(figsize=(8, 4.5))
    for i, (name, (held_out, training)) in enumerate(curves.items()):
        ax.plot(*zip(*training), color=f"C{i}", alpha=0.25, lw=0.8)
        ax.plot(*zip(*held_out), "o-", color=f"C{i}", ms=3, label=f"{name} (held-out)")
    for level in levels:
        ax.axhline(level, color="0.5", ls=":", lw=0.8)
    if floor is not None:
        ax.axhline(floor, color="k", ls="--", lw=1, label=f"entropy floor {floor:.3f}")
    ax.set(xlabel="wall-clock seconds from the aligned start", ylabel="cross-entropy (nats/token)")
    ax.set_title("loss against wall-clock, one worker slowed 2× (faint: server 0's training "
                 "loss per clock; dotted: the table's levels)", fontsize=9)
    return finish(fig, out_path, [ax])
