"""Agreement before communication: each rank finishes its own checks, then one small exchange
tells every rank whether any of them failed.

A rank can find a problem that the others do not: its copy of a file, its device, its memory, a
part of a checkpoint only it reads. If it simply exits, the others walk into the next collective
and wait for it until the watchdog fires. So every rank runs its checks to the end, catching the
errors that a bad input can cause, and then all ranks exchange what they found (one metadata
all-gather). If any rank failed, every rank raises the same :class:`RankErrors`, which lists each
distinct message once with the ranks that saw it, and the program ends alike everywhere.
"""

from __future__ import annotations

import contextlib


class RankErrors(Exception):
    """Problems that some ranks found, known to every rank: ``reports`` is a list of
    (message, ranks that saw it), in the order of the lowest rank; ``size`` is the world size."""

    def __init__(self, reports: list[tuple[str, list[int]]], size: int):
        self.reports, self.size = reports, size
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        """Each distinct message once; prefixed by the ranks that saw it unless all did."""
        return [message if len(ranks) == self.size else f"{_ranks(ranks)} of {self.size}: {message}"
                for message, ranks in self.reports]


def agree(comm, problems: list[str]) -> None:
    """Collective over ``comm`` (``None``: this process alone): raise :class:`RankErrors` on
    every rank if any rank passes a non-empty ``problems`` list; return on every rank if none."""
    everyone = [problems] if comm is None else comm.allgather_obj(problems, "start-up agreement")
    reports: dict[str, list[int]] = {}
    for rank, found in enumerate(everyone):
        for message in found:
            reports.setdefault(message, []).append(rank)
    if reports:
        raise RankErrors(list(reports.items()), len(everyone))


@contextlib.contextmanager
def agreeing(comm, expected: tuple[type[BaseException], ...]):
    """Run a block of this rank's own checks, then :func:`agree` on its outcome.

    An exception of an ``expected`` type (a bad input) becomes this rank's problem, its message
    shared. Any other exception is a bug and propagates (under MPI, to the abort path)."""
    problems = []
    try:
        yield
    except expected as error:
        problems.append(_message(error))
    agree(comm, problems)  # raises on every rank if any failed, this one included


def _message(error: BaseException) -> str:
    if isinstance(error, MemoryError):  # NumPy's says which array could not be allocated
        return f"out of memory: {error}" if str(error) else "out of memory"
    return str(error) or type(error).__name__


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
