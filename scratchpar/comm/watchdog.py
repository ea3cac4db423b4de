"""The watchdog's vocabulary: how long a wait may last, what a rank is doing, and the reports
when a wait lasts too long or MPI fails a message."""

from __future__ import annotations

import os
from typing import NamedTuple

TIMEOUT_ENV = "SCRATCHPAR_COMM_TIMEOUT"
DEBUG_ENV = "SCRATCHPAR_DEBUG"
DEFAULT_TIMEOUT_S = 600.0


def default_timeout() -> float:
    """Seconds a blocking wait may last: ``$SCRATCHPAR_COMM_TIMEOUT``, else 600 (0 = forever)."""
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds, got {raw!r}") from None
    if value < 0:
        raise ValueError(f"{TIMEOUT_ENV} must be >= 0 (0 waits forever), got {value}")
    return value


def debug_enabled() -> bool:
    """``$SCRATCHPAR_DEBUG`` set, not 0: compare collectives' signatures first (comm/debug.py)."""
    return os.environ.get(DEBUG_ENV, "0") not in ("", "0")


class Wait(NamedTuple):
    """What a rank is waiting for: the operation, its sequence number, the buffer and the peer."""

    op: str
    seq: int
    kind: str = ""
    shape: tuple = ()
    dtype: object = ""
    peer: int | None = None

    def describe(self) -> str:
        if str(self.dtype) == "":  # no buffer: a barrier or a metadata exchange
            return f"{self.op} #{self.seq}"
        way = "to" if self.kind == "send" else "from"
        peer = "" if self.peer is None else f" {way} rank {self.peer}"
        kind = f" {self.kind}" if self.kind not in ("", self.op) else ""  # not "send #3 send"
        return f"{self.op} #{self.seq}{kind} of shape {self.shape} {self.dtype}{peer}"


class Recent:
    """The operation started most recently on a communicator and its splits and dups alike."""

    __slots__ = ("comm", "wait")

    def __init__(self):
        self.comm, self.wait = "", None

    def note(self, comm_name: str, wait: Wait) -> Wait:
        self.comm, self.wait = comm_name, wait
        return wait

    def note_fields(self, comm_name: str, fields: tuple) -> None:
        """A :class:`Wait`'s fields, made into one only if asked for (a message's quick path)."""
        self.comm, self.wait = comm_name, fields

    def describe(self) -> str | None:
        self.wait = made(self.wait)
        return None if self.wait is None else f"{self.wait.describe()} on {self.comm}"


def made(wait: Wait | tuple | None) -> Wait | None:
    """``wait``, or the :class:`Wait` of its fields: a message on a quick path carries its
    fields alone, and the record is built only if asked for (a failure, a long wait)."""
    return Wait(*wait) if type(wait) is tuple else wait


def report(rank: int, comm_name: str, waits: list[Wait], waited_s: float) -> str:
    """The watchdog's message: who waited, how long, on what, and the likely causes."""
    what = "; ".join(w.describe() for w in waits) or "a request"
    return (
        f"rank {rank} waited {waited_s:.1f} s on {comm_name}: {what}. "
        "The peer may have stopped or crashed, or the ranks called different operations "
        f"(set SCRATCHPAR_DEBUG=1 to check every collective; {TIMEOUT_ENV} sets the limit)."
    )


def failed(rank: int, comm_name: str, failures: list[tuple[Wait, str]]) -> str:
    """The message when MPI fails messages: each one, with MPI's reason."""
    lines = "\n".join(f"  {wait.describe()}: {reason}" for wait, reason in failures)
    return (f"rank {rank} on {comm_name}: MPI failed\n{lines}\nA truncated message means the "
            "ranks disagree on a shape or dtype (SCRATCHPAR_DEBUG=1 checks every collective "
            "before it starts).")
