"""Matplotlib for every plot here: headless (Agg), and one way to write the PNG."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend, which needs no display (ImportError without
    matplotlib: the CLI turns that into an install hint)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, out: str | Path, **savefig) -> Path:
    """Write ``fig`` to ``out``, creating its folder, close it, and return the path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, **savefig)
    pyplot().close(fig)
    return out
