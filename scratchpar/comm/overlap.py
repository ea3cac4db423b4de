"""Buckets started in order as backward completes them, so their collectives overlap backward."""

from __future__ import annotations


class Overlap:
    """When to start each bucket's collective, for buckets ``0 … K−1`` of ``counts[k]`` arrays.

    Bucket k starts once backward has produced all its arrays and every bucket before it has
    started: in order, so every rank posts the same collectives in the same sequence whatever
    order its backward finished them in (Li et al. 2020, PyTorch DDP, §3.2.3). Each array that
    backward produces afterwards advances the collectives in flight (:meth:`ready`). After
    backward, :meth:`finish` starts the buckets left, an array backward never reached counting
    as zeros, and waits for them all. The caller's hooks:

    - ``start(k)`` packs bucket k and starts its collective, returning the handle;
    - ``finished(k, result)`` takes the result of bucket k's finished collective;
    - ``complete(k)`` hears first that bucket k's arrays are all final, before it may start.
    """

    def __init__(self, counts: list[int], start, finished=None, complete=None):
        self.counts = list(counts)
        self._start, self._finished, self._complete = start, finished, complete
        self.begin()

    def begin(self) -> None:
        """A new backward: every array still to come, no bucket started."""
        self.missing = list(self.counts)  # per bucket: arrays backward has not produced yet
        self.next = 0  # the next bucket to start
        self.inflight: list[tuple] = []  # (bucket, handle), in start order

    def ready(self, k: int | None) -> None:
        """Backward produced one array of bucket k (None: an array in no bucket): start the
        buckets that are complete now, in order, and advance the ones in flight."""
        if k is not None:
            self.missing[k] -= 1
            if self.missing[k] == 0:
                if self._complete is not None:
                    self._complete(k)
                self._launch(final=False)
        running = []
        for bucket, handle in self.inflight:
            if handle.test():
                self._done(bucket, handle)
            else:
                running.append((bucket, handle))
        self.inflight = running

    def finish(self) -> None:
        """After backward: start every bucket left, in order, then wait for each in turn."""
        self._launch(final=True)
        for bucket, handle in self.inflight:
            handle.wait()
            self._done(bucket, handle)
        self.inflight = []

    def _launch(self, final: bool) -> None:
        while self.next < len(self.counts) and (final or self.missing[self.next] == 0):
            self.inflight.append((self.next, self._start(self.next)))
            self.next += 1

    def _done(self, k: int, handle) -> None:
        if self._finished is not None:
            self._finished(k, handle.wait())
