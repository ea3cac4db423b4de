"""The one place that waits: every blocking wait of a Communicator polls here, under the watchdog.

A blocking ``MPI_Wait`` typically spins on the CPU; with more ranks than cores, a spinning rank
takes the core from the very rank it waits for. So a wait tests and yields the core, then naps
longer and longer, and past the communicator's ``timeout`` raises :class:`WaitTimeout` naming
what it waited on (docs/collectives.md, "Waiting on an oversubscribed machine").
"""

from __future__ import annotations

import functools
import os
import time

from mpi4py import MPI

from scratchpar.comm.buffers import Request
from scratchpar.comm.cuda_aware import failed_directly
from scratchpar.comm.errors import MessageError, WaitTimeout
from scratchpar.comm.watchdog import failed, report

SPIN_S = 2e-2  # poll (yielding the core to any runnable rank) this long before napping
MAX_NAP_S = 1e-3  # then sleep between polls, doubling up to this, to free an oversubscribed core
QUICK_S = 1e-4  # a plain message's own polling, before the general wait takes over


class Waiting:
    """Mixed into :class:`~scratchpar.comm.mpi.Communicator`, whose ``rank``, ``name``,
    ``timeout`` and ``cuda_aware`` the reports name: wait for one request, all of a list, or the
    first of a list to complete."""

    def wait(self, request: Request) -> None:
        if request.finish is None and not request.mpi:  # complete and delivered: waited before
            return
        try:
            if request.mpi.Test():  # already in: none of a longer wait's bookkeeping
                request.complete()
                return
        except MPI.Exception as error:
            raise self._failure([request], [error.Get_error_code()]) from None
        self.wait_all([request])

    def test_all(self, requests: list[Request]) -> bool:
        """True (and receives delivered) if every request is complete; never blocks."""
        if not self._testall(requests, [r.mpi for r in requests], [MPI.Status() for _ in requests]):
            return False
        for r in requests:
            r.complete()
        return True

    def wait_all(self, requests: list[Request]) -> None:
        """Block until every request completes, or raise :class:`WaitTimeout` past the deadline."""
        mpi, statuses = [r.mpi for r in requests], [MPI.Status() for _ in requests]
        test = functools.partial(self._testall, requests, mpi, statuses)
        if not self._spin(test):
            self._poll(test, lambda: [r.wait for r, m in zip(requests, mpi)
                                      if m != MPI.REQUEST_NULL])
        for r in requests:
            r.complete()

    def wait_any(self, requests: list[Request]) -> int:
        """Block until one of ``requests`` completes; deliver it and return its index. A server
        that posts one receive per client serves them in arrival order this way. Raises
        :class:`WaitTimeout` past the deadline, as :meth:`wait_all` does."""
        live = [i for i, r in enumerate(requests) if r.mpi != MPI.REQUEST_NULL]
        if not live:
            raise ValueError("wait_any needs at least one request still pending")
        pending, mpi = [requests[i] for i in live], [requests[i].mpi for i in live]
        index = live[self._poll(lambda: self._testany(pending, mpi),
                                lambda: [r.wait for r in pending])]
        requests[index].complete()
        return index

    def _poll(self, done, waits):
        """Call ``done()`` until it returns neither ``False`` nor ``None``, and return that: spin
        (yielding the core) at first, then nap longer and longer; past ``timeout`` raise
        :class:`WaitTimeout` naming ``waits()``. Every blocking wait here goes through this."""
        start = time.perf_counter()
        nap = 1e-5
        while (result := done()) is None or result is False:
            waited = time.perf_counter() - start
            if self.timeout and waited > self.timeout:
                raise WaitTimeout(report(self.rank, self.name, waits(), waited))
            if waited > SPIN_S:
                time.sleep(nap)
                nap = min(2 * nap, MAX_NAP_S)
            else:
                os.sched_yield()  # free the core at once if another rank waits for it
        return result

    def _spin(self, test) -> bool:
        """Call ``test()``, yielding the core between calls as :meth:`_poll` does, until it is
        true or ``QUICK_S`` has passed: whether it came true. A wait this short needs none of
        a long wait's bookkeeping."""
        deadline = time.perf_counter() + QUICK_S
        while not test():
            if time.perf_counter() > deadline:
                return False
            os.sched_yield()
        return True

    def _testany(self, requests: list[Request], mpi: list) -> int | None:
        """``MPI_Testany``: the index of a completed request, or ``None``; an MPI error becomes a
        :class:`MessageError` naming the messages."""
        status = MPI.Status()
        try:
            index, done = MPI.Request.Testany(mpi, status)
        except MPI.Exception as error:
            reason = _reason(error.Get_error_code())
            raise MessageError(failed(self.rank, self.name, [(r.wait, reason) for r in requests])
                               + failed_directly(self.cuda_aware)) from None
        return index if done and index != MPI.UNDEFINED else None

    def _testall(self, requests: list[Request], mpi: list, statuses: list) -> bool:
        """``MPI_Testall``; an MPI error becomes a :class:`MessageError` naming each failed
        message and MPI's reason (MPI's own words only say "see the MPI_ERROR field")."""
        try:
            return MPI.Request.Testall(mpi, statuses)
        except MPI.Exception as error:
            codes = [s.Get_error() for s in statuses]
            if error.Get_error_code() != MPI.ERR_IN_STATUS:
                codes = [error.Get_error_code()] * len(requests)
            raise self._failure(requests, codes) from None

    def _failure(self, requests: list[Request], codes: list[int]) -> MessageError:
        failures = [(r.wait, _reason(c)) for r, c in zip(requests, codes)
                    if MPI.Get_error_class(c) not in (MPI.SUCCESS, MPI.ERR_PENDING)]
        return MessageError(failed(self.rank, self.name, failures)
                            + failed_directly(self.cuda_aware))


def _reason(code: int) -> str:
    """MPI's words for an error code, read the same under every MPI: Open MPI leads with the
    class's name ("MPI_ERR_TRUNCATE: message truncated"), MPICH does not ("Message truncated")."""
    words = MPI.Get_error_string(code)
    name, colon, rest = words.partition(": ")
    if colon and name.startswith("MPI_ERR_"):
        words = rest[:1].upper() + rest[1:]
    return words
