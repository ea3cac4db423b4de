"""Exposed communication, read off a trace: time a rank communicates while it computes nothing.

Per rank, the window runs from its first compute region to its last. Communication inside the
window that no compute region covers is exposed: the step waits for it. Overlapped
communication (a bucket all-reduce under backward) costs nothing here, and the fraction is the
share of the window that the step spent only communicating.
"""

from __future__ import annotations

from collections import defaultdict

from .chrome import read_regions


def merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals, as sorted disjoint intervals."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def covered(intervals, lo: float, hi: float) -> float:
    """Total length of ``intervals`` (disjoint) inside [lo, hi]."""
    return sum(max(0.0, min(end, hi) - max(start, lo)) for start, end in intervals)


def exposed(regions: list[dict]) -> dict[int, dict]:
    """Per rank (pid): ``window_us``, ``exposed_us`` and ``fraction`` from Chrome "X" regions."""
    by_rank: dict[int, dict[str, list]] = defaultdict(lambda: {"compute": [], "comm": []})
    for r in regions:
        kind = "compute" if r["cat"] == "compute" else "comm" if r["cat"].startswith("comm") \
            else None
        if kind is not None:
            by_rank[r["pid"]][kind].append((r["ts"], r["ts"] + r["dur"]))
    out = {}
    for pid, spans in sorted(by_rank.items()):
        compute = merge(spans["compute"])
        if not compute:
            continue
        lo, hi = compute[0][0], compute[-1][1]
        busy = merge(spans["compute"] + spans["comm"])
        only_comm = covered(busy, lo, hi) - covered(compute, lo, hi)  # comm ∖ compute
        out[pid] = {"window_us": hi - lo, "exposed_us": only_comm,
                    "fraction": only_comm / (hi - lo) if hi > lo else 0.0}
    return out


def report(trace_path: str) -> str:
    """A line per rank: exposed communication in ms and as a share of the window."""
    ranks = exposed(read_regions(trace_path))
    if not ranks:
        raise ValueError(f"{trace_path}: no compute regions to measure against")
    lines = [f"rank {pid}: communication exposed {v['exposed_us'] / 1e3:.1f} ms of "
             f"{v['window_us'] / 1e3:.1f} ms ({v['fraction']:.0%})" for pid, v in ranks.items()]
    return "\n".join(lines)
