"""This rank's share of a global batch: the rows every collective's chunk layout gives it."""

from __future__ import annotations

from dataclasses import dataclass

from scratchpar.comm.chunks import bounds


@dataclass(frozen=True)
class Part:
    """Rows ``start … stop`` of a global batch of ``total`` rows, drawn alone (``batch``: an
    array, or a tuple of arrays cut alike): what a rank that reads only its own rows is handed,
    so that no rank draws the rows of the others."""

    batch: object
    start: int
    stop: int
    total: int


def rows(batch) -> int:
    """The rows of ``batch``: an array's, or those of a tuple of arrays cut alike."""
    return len(batch[0] if isinstance(batch, tuple) else batch)


def shard(batch, rank: int, size: int):
    """Rows ``bounds(len, size)[rank]`` of ``batch``: an array, or a tuple of arrays cut alike.

    Any batch size works: the first ``len % size`` ranks get one row more, and a rank gets 0 rows
    when the batch has fewer rows than there are ranks. A :class:`Part` is already those rows:
    its batch, once its rows are checked to be the ones asked for.
    """
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} is outside 0..{size - 1}")
    if isinstance(batch, Part):
        want = bounds(batch.total, size)[rank]
        if (batch.start, batch.stop) != want:
            raise ValueError(f"rank {rank} of {size} reads rows {want[0]}..{want[1]} of "
                             f"{batch.total}, but holds {batch.start}..{batch.stop}")
        return batch.batch
    arrays = batch if isinstance(batch, tuple) else (batch,)
    lengths = {len(a) for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"the arrays of a batch must have the same number of rows, got {lengths}")
    start, stop = bounds(lengths.pop(), size)[rank]
    rows = tuple(a[start:stop] for a in arrays)
    return rows if isinstance(batch, tuple) else rows[0]
