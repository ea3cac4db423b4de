"""The widest GPT a contender trains on a GPU within a memory budget per rank, found by trying."""

from __future__ import annotations

import gc

from ...comm.errors import WaitTimeout

GiB = 1 << 30
FIT_TIMEOUT_S = 60.0  # how long a rank waits for one that ran out of memory mid-collective


def gpt_parameters(spec: dict) -> int:
    """Ψ of nn.GPT (untied head): token V·C, position T·C, per block 12C² + 13C, final norm 2C,
    head C·V."""
    v, t, c = spec["vocab"], spec["seq"], spec["d_model"]
    return 2 * v * c + t * c + spec["layers"] * (12 * c * c + 13 * c) + 2 * c


def at_width(cfg: dict, d_model: int) -> dict:
    """The GPT of ``cfg`` at width ``d_model``, one head per ``head_dim`` channels."""
    return {**cfg["model"], "d_model": d_model, "heads": d_model // cfg["head_dim"]}


def fits(comm, attempt, spec: dict) -> bool:
    """Whether one step of ``spec`` fits on every rank. It runs on a duplicate communicator
    whose waits give up after FIT_TIMEOUT_S, so that the ranks still waiting on one that ran
    out of memory give up too; then every rank frees its pool and they agree."""
    import cupy

    trial = comm.dup("fit")
    trial.timeout = FIT_TIMEOUT_S
    try:
        attempt(trial, spec)
        ok = True
    except (cupy.cuda.memory.OutOfMemoryError, WaitTimeout):
        ok = False
    gc.collect()
    cupy.get_default_memory_pool().free_all_blocks()
    verdict = all(comm.allgather_obj(ok, "fits"))
    trial.free()
    return verdict


def largest(comm, cfg: dict, attempt) -> dict:
    """Double ``d_model`` from ``cfg["start"]`` while a step fits within ``cfg["budget_gib"]``
    per rank (CuPy's pool limit), up to ``cfg["max_d_model"]``; then bisect, in multiples of
    ``head_dim``, between the widest that fitted and the narrowest that did not.
    ``attempt(comm, spec)`` builds the contender and takes one step."""
    import cupy

    pool = cupy.get_default_memory_pool()
    pool.set_limit(size=int(cfg["budget_gib"] * GiB))
    q = cfg["head_dim"]
    lo, hi, tried = 0, cfg["start"], []
    while hi <= cfg["max_d_model"]:
        tried.append([hi, fits(comm, attempt, at_width(cfg, hi))])
        if not tried[-1][1]:
            break
        lo, hi = hi, 2 * hi
    capped = hi > cfg["max_d_model"]
    while not capped and hi - lo > q:
        mid = (lo + hi) // 2 // q * q
        tried.append([mid, fits(comm, attempt, at_width(cfg, mid))])
        lo, hi = (mid, hi) if tried[-1][1] else (lo, mid)
    pool.set_limit(size=0)  # no limit
    best = at_width(cfg, lo) if lo else None
    return {"d_model": lo or None, "params": gpt_parameters(best) if best else None,
            "capped": capped, "tried": tried}
