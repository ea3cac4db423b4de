"""The vocabulary of pipeline schedules: actions, virtual stages, and which messages match.

A schedule is ``dict[rank, list[Action]]`` (DESIGN.md, "Pipeline schedules are data"): what each
rank does, in order. With ``v`` model chunks per rank (interleaved schedules), chunk ``c`` of rank
``r`` is virtual stage ``k = c·p + r`` of ``P = p·v``. Its input comes from virtual stage ``k − 1``
and its output goes to ``k + 1`` (Narayanan et al. 2021, §2.2: chunks assigned round-robin).
Without interleaving ``v = 1`` and the virtual stage is the rank.
"""

from __future__ import annotations

from dataclasses import dataclass

COMPUTE = ("F", "B", "W")  # forward; backward (W split off: B is the input gradient alone)
SENDS = {"SEND_ACT": "RECV_ACT", "SEND_GRAD": "RECV_GRAD"}  # a send and the receive it meets
RECEIVES = {recv: send for send, recv in SENDS.items()}
KINDS = (*COMPUTE, *SENDS, *RECEIVES, "STEP")


class ScheduleError(ValueError):
    """A schedule that cannot run; the message lists every problem found."""


@dataclass(frozen=True)
class Action:
    """One thing a rank does.

    ``F``/``B``/``W``: forward, backward, weight gradient of micro-batch ``mb`` through chunk
    ``chunk``. ``SEND_ACT``/``RECV_ACT``: the activation of ``mb`` leaving chunk ``chunk`` for rank
    ``peer`` / arriving from ``peer`` for chunk ``chunk``. ``SEND_GRAD``/``RECV_GRAD``: the same for
    the gradient going back. ``STEP``: the optimizer update, where ``mb`` is None for the one
    update after a flush, or the micro-batch whose backward it applies (PipeDream's per-micro-batch
    updates).
    """

    kind: str
    mb: int | None = None
    chunk: int = 0
    peer: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ScheduleError(f"unknown action kind {self.kind!r}; kinds are {KINDS}")

    def __str__(self) -> str:
        """``F3``, ``B3.1`` (chunk 1), ``SEND_ACT 3→2``, ``RECV_GRAD 3←2``, ``STEP``, ``STEP 3``."""
        mb = "" if self.mb is None else str(self.mb)
        chunk = f".{self.chunk}" if self.chunk else ""
        if self.kind in COMPUTE:
            return f"{self.kind}{mb}{chunk}"
        if self.kind == "STEP":
            return f"STEP {mb}".rstrip()
        arrow = "→" if self.kind in SENDS else "←"
        return f"{self.kind} {mb}{chunk}{arrow}{self.peer}"

    @property
    def is_compute(self) -> bool:
        return self.kind in COMPUTE

    @property
    def is_comm(self) -> bool:
        return self.kind in SENDS or self.kind in RECEIVES


Schedule = dict[int, list[Action]]


def virtual_stage(rank: int, chunk: int, p: int) -> int:
    """Chunk ``chunk`` of rank ``rank`` is virtual stage ``chunk·p + rank``."""
    return chunk * p + rank


def place(k: int, p: int) -> tuple[int, int]:
    """(rank, chunk) of virtual stage ``k``."""
    return k % p, k // p


def chunks(schedule: Schedule) -> int:
    """``v``: model chunks per rank, from the largest chunk any action names."""
    return 1 + max((a.chunk for acts in schedule.values() for a in acts), default=0)


def micro_batches(schedule: Schedule) -> int:
    """``m``: one more than the largest micro-batch any compute names."""
    return 1 + max((a.mb for acts in schedule.values() for a in acts if a.is_compute),
                   default=-1)


def splits_backward(schedule: Schedule) -> bool:
    """Whether ``schedule`` runs the weights' gradients apart, as W (a zero-bubble one)."""
    return any(a.kind == "W" for acts in schedule.values() for a in acts)


def matching(rank: int, action: Action, p: int) -> tuple[int, Action]:
    """The rank and the action that meet ``action`` (a send or a receive) of ``rank``.

    An activation goes from virtual stage k to k + 1, a gradient from k to k − 1. The receive
    names the chunk that consumes the message, the send the chunk that produced it.
    """
    k = virtual_stage(rank, action.chunk, p)
    downstream = action.kind in ("SEND_ACT", "RECV_GRAD")
    other_rank, other_chunk = place(k + 1 if downstream else k - 1, p)
    kind = SENDS.get(action.kind) or RECEIVES[action.kind]
    return other_rank, Action(kind, action.mb, other_chunk, rank)
