"""``xp.cuda`` of the double: one simulated device, and streams the host synchronizes with.

There is one queue (:class:`tally.Kernels`): any stream's ``synchronize`` waits for all the
double's queued work, which is what the checks need (was the host synchronized before MPI read
device memory?), not a model of concurrency between streams.
"""

from __future__ import annotations

from scratchpar.double import tally

DEVICE_COUNT = 1


class Device:
    def __init__(self, index: int = 0):
        if not 0 <= index < DEVICE_COUNT:
            raise ValueError(f"invalid device {index}: the double has {DEVICE_COUNT}")
        self.id = index

    def use(self) -> None:
        pass


class Stream:
    """A stream; ``use()`` makes it current."""

    null: Stream

    def __init__(self, non_blocking: bool = False):
        self.non_blocking = non_blocking

    def use(self) -> Stream:
        global _current
        _current = self
        return self

    def synchronize(self) -> None:
        tally.host_sync("synchronize")


Stream.null = Stream()
_current = Stream.null


def get_current_stream() -> Stream:
    return _current


class runtime:  # noqa: N801 (CuPy's name)
    @staticmethod
    def getDeviceCount() -> int:  # noqa: N802
        return DEVICE_COUNT
