"""How n elements split into p near-equal contiguous chunks: the layout every collective shares."""

from __future__ import annotations


def counts(n: int, p: int) -> list[int]:
    """Chunk sizes: the first ``n % p`` chunks hold one element more (``sum == n``)."""
    base, extra = divmod(n, p)
    return [base + (i < extra) for i in range(p)]


def bounds(n: int, p: int) -> list[tuple[int, int]]:
    """``[(start, stop), …]`` of each chunk; empty chunks when ``n < p``."""
    out, start = [], 0
    for c in counts(n, p):
        out.append((start, start + c))
        start += c
    return out


def offsets(sizes: list[int]) -> list[int]:
    """Start of each block when blocks of ``sizes`` lie end to end."""
    out, start = [], 0
    for s in sizes:
        out.append(start)
        start += s
    return out


def spans_of(sizes: list[int]) -> list[tuple[int, int]]:
    """``[(start, stop), …]`` of each block when blocks of ``sizes`` lie end to end."""
    return [(start, start + s) for start, s in zip(offsets(sizes), sizes)]
