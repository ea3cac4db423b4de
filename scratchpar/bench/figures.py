"""A benchmark's figures: drawn where matplotlib is installed, a line saying so where it is not."""

from __future__ import annotations

import importlib.util


def draw_figures(directory, draw, *args, without: str = "") -> list[str]:
    """The paths ``draw(directory, *args)`` wrote, printed; ``[]`` without a ``directory``,
    or without matplotlib (``without``: what the benchmark still writes then, e.g. its traces)."""
    if not directory:
        return []
    if importlib.util.find_spec("matplotlib") is None:
        print(f"\nfigures: matplotlib missing (pip install 'scratchpar[plot]'){without}")
        return []
    figures = draw(directory, *args)
    print("\nfigures: " + ", ".join(figures))
    return figures
