"""A collective in flight. An algorithm is a generator that yields each batch of messages it has
posted and resumes once they have all arrived. A :class:`Handle` drives it, blocking or not."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from scratchpar.comm.watchdog import Wait

if TYPE_CHECKING:  # only for annotations: importing collectives must not start MPI
    from scratchpar.comm.buffers import Request
    from scratchpar.comm.mpi import Communicator


class Handle:
    """Drives one algorithm's steps on ``comm``; ``test()`` never blocks, ``wait()`` finishes."""

    def __init__(self, comm: Communicator, wait: Wait, steps: Iterator[list[Request]], result=None,
                 after=None):
        self.comm, self.info, self.result = comm, wait, result
        self._steps, self._after = steps, after  # after(): once, when the last step is done
        self.done = False
        self._pending: list[Request] = []
        self._tracer = comm.tracer  # records the collective as one region, start to completion
        self._start = None if self._tracer is None else self._tracer.now()
        self._advance()

    def test(self) -> bool:
        """Advance as far as arrived messages allow; True once the collective is complete."""
        while not self.done and self.comm.test_all(self._pending):
            self._advance()
        return self.done

    def wait(self):
        """Block until complete (under the watchdog) and return the result."""
        while not self.done:
            self.comm.wait_all(self._pending)
            self._advance()
        return self.result

    def _advance(self) -> None:
        outer = self.comm.enter(self.info)
        try:
            self._pending = next(self._steps)
        except StopIteration:
            self.done, self._pending = True, []
            if self._after is not None:
                self._after()
            if self._tracer is not None:
                nbytes = math.prod(self.info.shape) * self.info.dtype.itemsize
                self._tracer.record(self.info.op, "comm", self._start, self._tracer.now(), nbytes)
        finally:
            self.comm.enter(outer)
