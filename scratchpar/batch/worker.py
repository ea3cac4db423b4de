"""One rank of the largest batch's real check: the training command's run of a layout for two
steps under an address-space limit of the budget, its peak traced."""

from __future__ import annotations

import resource

from ..bench.plan.worker import refusal, traced


def check(comm, cfg: dict) -> dict:
    """Under ``cfg["budget"]`` bytes of address space a rank, the largest rank's peak of traced
    bytes over the run of ``cfg["flags"]`` for two steps (rank 0's evaluation included), or the
    training command's refusal (``not_run``). Memory running out ends the job, as it ends the
    command."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (cfg["budget"], hard))
    row: dict = {}
    with refusal(row):
        row["peak"] = traced(comm, cfg["flags"])
    return row
