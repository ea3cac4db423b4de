"""What the double saw: host syncs (with the line that caused each), copies, and the stream.

A GPU runs kernels asynchronously; the host waits only when it reads device memory (``float``,
``.item()``, ``.get()``) or synchronizes. Those waits are what make a training loop slow, so the
double records each one with the engine line that asked for it, and tests bound them per step.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field

_ACTIVE: list[Tally] = []  # the tallies of the watch() blocks open now, innermost last


@dataclass
class Tally:
    """Events of one ``watch()`` block."""

    syncs: list[str] = field(default_factory=list)  # "item at scratchpar/parallel/dp.py:50"
    to_host_bytes: int = 0
    to_device_bytes: int = 0
    copies: int = 0  # between host and device, either way
    pageable_copies: list[str] = field(default_factory=list)  # copies not through pinned memory
    pinned_bytes: int = 0  # pinned host memory allocated
    scalars: list[str] = field(default_factory=list)  # host numbers made device arrays: a copy
    # to the device each on a GPU, which a captured graph cannot replay with another number

    def syncs_from(self, package: str = "scratchpar") -> list[str]:
        """The syncs caused by lines of ``package`` (tests read device memory freely)."""
        return [s for s in self.syncs if f" at {package}" in s]


class Kernels:
    """The one simulated stream: kernels are 'queued' until the host synchronizes with it."""

    queued = False


@contextlib.contextmanager
def watch():
    """Record the double's events inside the block: ``with watch() as seen: …; seen.syncs``."""
    tally = Tally()
    _ACTIVE.append(tally)
    try:
        yield tally
    finally:
        _ACTIVE.remove(tally)


def caller() -> tuple[str, str]:
    """(module, "path:line") of the nearest frame outside NumPy and the double."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.startswith("numpy") or module.startswith("scratchpar.double")):
            path = frame.f_code.co_filename
            short = path[path.rfind("scratchpar/"):] if "scratchpar/" in path else path
            return module, f"{short}:{frame.f_lineno}"
        frame = frame.f_back
    return "", "?"


def from_engine() -> bool:
    """Whether the nearest caller outside NumPy and the double is engine code (``scratchpar``)."""
    module, _ = caller()
    return module == "scratchpar" or module.startswith("scratchpar.")


def host_sync(kind: str) -> None:
    """The host waited for the device (to read a value, or to synchronize)."""
    Kernels.queued = False
    if _ACTIVE:
        where = caller()[1]
        for tally in _ACTIVE:
            tally.syncs.append(f"{kind} at {where}")


def copied(nbytes: int, to_host: bool, pinned: bool) -> None:
    """Bytes crossed the bus; ``pinned`` whether the host side was pinned memory."""
    if to_host:
        Kernels.queued = False  # a device-to-host copy waits for the kernels before it
    if not _ACTIVE:
        return
    where = caller()[1]
    for tally in _ACTIVE:
        tally.copies += 1
        if to_host:
            tally.to_host_bytes += nbytes
        else:
            tally.to_device_bytes += nbytes
        if not pinned:
            tally.pageable_copies.append(f"{'to host' if to_host else 'to device'} at {where}")


def scalar_uploaded() -> None:
    """A host number (not an array) became a device array."""
    if _ACTIVE:
        where = caller()[1]
        for tally in _ACTIVE:
            tally.scalars.append(f"asarray at {where}")


def pinned_alloc(nbytes: int) -> None:
    for tally in _ACTIVE:
        tally.pinned_bytes += nbytes
