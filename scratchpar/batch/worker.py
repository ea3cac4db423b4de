"""One rank of the largest batch's real check: the training command's run of a layout for two
steps with the budget as all the memory it has, its peak measured."""

from __future__ import annotations

import os
import resource

from .. import backend
from ..plan.traced import refusal, traced


def hold_to(budget: int) -> None:
    """Give this rank ``budget`` bytes. On a GPU, CuPy's memory pool is capped, so an array
    past it raises OutOfMemoryError as a full device would, and the training command reads the
    cap (``CUPY_GPU_MEMORY_LIMIT``) as the device's memory; on the CPU, the address space."""
    if backend.device() == "cuda":
        import cupy

        os.environ["CUPY_GPU_MEMORY_LIMIT"] = str(budget)
        cupy.get_default_memory_pool().set_limit(size=budget)
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (budget, hard))


def check(comm, cfg: dict) -> dict:
    """Under ``cfg["budget"]`` bytes a rank, the largest rank's peak of measured bytes over
    the run of ``cfg["flags"]`` for two steps (rank 0's evaluation included), or the training
    command's refusal (``not_run``). Memory running out ends the job, as it ends the
    command."""
    hold_to(cfg["budget"])
    row: dict = {}
    with refusal(row):
        row["peak"] = traced(comm, cfg["flags"])
    return row
