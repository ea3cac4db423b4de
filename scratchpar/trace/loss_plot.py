"""Draw a training loss curve from a JSONL metrics file, with the entropy floor beside it and the
steps skipped for a non-finite loss or gradient marked below it."""

from __future__ import annotations

import json
from pathlib import Path

from .figure import pyplot, save


def read_metrics(path: str | Path) -> tuple[dict, list[dict], dict | None, list[int]]:
    """(the last run's start record, its step records, its final record or None, the steps
    it skipped)."""
    start, steps, final, skips = {}, [], None, []
    for line in Path(path).read_text().splitlines():
        record = json.loads(line)
        event = record.get("event")
        if event == "start" and record.get("step", 0) == 0:
            start, steps, final, skips = record, [], None, []  # a fresh run restarts the story
        elif event == "start":
            start = start or record
        elif event == "step":
            steps = [r for r in steps if r["step"] < record["step"]] + [record]
        elif event == "skip":
            skips = [s for s in skips if s < record["step"]] + [record["step"]]
        elif event == "final":
            final = record
    return start, steps, final, skips


def plot_loss(path: str | Path, out: str | Path) -> Path:
    """Write a PNG of training loss against step, the held-out loss, and the entropy floor."""
    plt = pyplot()

    start, steps, final, skips = read_metrics(path)
    if not steps:
        raise ValueError(f"{path} holds no step records")
    unit = "token" if start.get("unit", "tok") == "tok" else "sample"
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    applied = [r for r in steps if r["loss"] is not None]  # a window of skipped steps has none
    ax.plot([r["step"] for r in applied], [r["loss"] for r in applied], label="training loss")
    if skips:
        ax.plot(skips, [0.0] * len(skips), "|", color="C3", ms=12,  # ticks on the bottom axis
                transform=ax.get_xaxis_transform(),
                label=f"skipped: loss or gradient not finite ({len(skips)})")
    if start.get("floor") is not None:
        ax.axhline(start["floor"], color="k", ls="--", lw=1,
                   label=f"entropy floor {start['floor']:.3f}")
    if final is not None and not isinstance(final["eval_loss"], str):  # "nan": diverged
        ax.plot([final["step"]], [final["eval_loss"]], "o", color="C3",
                label=f"held-out {final['eval_loss']:.3f}")
    ax.set_xlabel("step")
    ax.set_ylabel(f"cross-entropy (nats/{unit})")
    ax.set_title(f"{start.get('config', {}).get('model', {}).get('kind', 'model')} on "
                 f"{start.get('config', {}).get('data', {}).get('source', 'data')}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return save(fig, out)
