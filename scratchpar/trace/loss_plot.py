"""Draw a training loss curve from a JSONL metrics file, with the entropy floor beside it."""

from __future__ import annotations

import json
from pathlib import Path

from .figure import pyplot, save


def read_metrics(path: str | Path) -> tuple[dict, list[dict], dict | None]:
    """(the last run's start record, its step records, its final record or None)."""
    start, steps, final = {}, [], None
    for line in Path(path).read_text().splitlines():
        record = json.loads(line)
        event = record.get("event")
        if event == "start" and record.get("step", 0) == 0:
            start, steps, final = record, [], None  # a fresh run restarts the file's story
        elif event == "start":
            start = start or record
        elif event == "step":
            steps = [r for r in steps if r["step"] < record["step"]] + [record]
        elif event == "final":
            final = record
    return start, steps, final


def plot_loss(path: str | Path, out: str | Path) -> Path:
    """Write a PNG of training loss against step, the held-out loss, and the entropy floor."""
    plt = pyplot()

    start, steps, final = read_metrics(path)
    if not steps:
        raise ValueError(f"{path} holds no step records")
    unit = "token" if start.get("unit", "tok") == "tok" else "sample"
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    ax.plot([r["step"] for r in steps], [r["loss"] for r in steps], label="training loss")
    if start.get("floor") is not None:
        ax.axhline(start["floor"], color="k", ls="--", lw=1,
                   label=f"entropy floor {start['floor']:.3f}")
    if final is not None:
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
