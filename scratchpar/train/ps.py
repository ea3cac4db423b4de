"""The parameter servers from a Config: ``--ps-mode`` picks the variant, rank 0 says the roles."""

from __future__ import annotations

from ..parallel import ps


def build_ps(cfg, task, comm):
    """``--strategy ps``: ranks 0 … S−1 serve their key ranges from the host, the rest work."""
    from .build import build_optimizer

    t, common = cfg.train, {"servers": cfg.train.servers, "grad_clip": cfg.optim.grad_clip}
    args = (task.model, lambda params: build_optimizer(cfg, params), task.loss, task.count, comm)
    if t.ps_mode == "sync":
        strategy, rule = ps.SyncParameterServer(*args, **common), "synchronous"
    elif t.ps_mode == "locked":
        strategy, rule = ps.LockedParameterServer(*args, **common), "one worker at a time"
    elif t.ps_mode == "ssp":
        strategy = ps.SSPParameterServer(*args, staleness=t.staleness, **common)
        rule = f"bounded staleness τ = {t.staleness}"
    else:
        knobs = {"n_push": t.n_push, "n_fetch": t.n_fetch, **common}
        rule = f"asynchronous, pushes every {t.n_push} and pulls every {t.n_fetch} steps"
        if t.warmup_sync:
            strategy = ps.SyncThenAsync(*args, warmup=t.warmup_sync, **knobs)
            rule = f"synchronous for {t.warmup_sync} steps, then {rule}"
        else:
            strategy = ps.AsyncParameterServer(*args, **knobs)
    if comm.rank == 0:
        print(f"parameter servers ({rule}): the key ranges and their optimizer state live on "
              f"the host of {_span(0, t.servers)}; the workers are {_span(t.servers, comm.size)}",
              flush=True)
    return strategy


def _span(first: int, stop: int) -> str:
    return f"rank {first}" if stop == first + 1 else f"ranks {first}–{stop - 1}"
