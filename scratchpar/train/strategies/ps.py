"""Parameter servers on the command line: their flags, rules, and ``--ps-mode``'s variant."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ...parallel import ps
from ..option import count, flag_of, opt
from .family import OwnPieces

PS = ("ps",)
MODE_OF = {"staleness": "ssp", "warmup_sync": "async", "n_push": "async", "n_fetch": "async"}
LEAST = {"staleness": 0, "warmup_sync": 0, "n_push": 1, "n_fetch": 1}


@dataclass(frozen=True)
class ServerFlags:
    servers: int = opt(1, "ps: server ranks 0 … S−1, each owning a key range of the "
                          "parameters; the other ranks are workers", owners=PS)
    ps_mode: str = opt("sync", "ps: synchronous (every worker's push, one update, every worker "
                               "pulls), locked (one worker at a time reads, updates and writes), "
                               "async (Downpour: each push applied as it arrives) or ssp "
                               "(bounded staleness)", choices=("sync", "locked", "async", "ssp"),
                       owners=PS)
    staleness: int = opt(2, "ps ssp: τ, how many clocks a worker may run ahead of the slowest "
                            "(0 = synchronous; --ps-mode async: nobody waits)", owners=PS)
    warmup_sync: int = opt(0, "ps async: synchronous steps before the asynchronous ones "
                              "(DistBelief's warm start)", owners=PS)
    n_push: int = opt(1, "ps async: a worker pushes its summed gradient every this many steps",
                      owners=PS)
    n_fetch: int = opt(1, "ps async: a worker pulls the parameters every this many steps",
                       owners=PS)


FLAG = {f.name: flag_of(f) for f in fields(ServerFlags)}
DEFAULT = {f.name: f.default for f in fields(ServerFlags)}


class ServerFamily(OwnPieces):
    """``--strategy ps``: ranks 0 … S−1 serve their key ranges from the host, the rest work."""

    names = {"ps": "parameter servers (--ps-mode from synchronous to Downpour)"}
    flags = ServerFlags

    def problems(self, c, world_size: int) -> list[str]:
        t, problems = c.train, []
        if not 1 <= t.servers < world_size:
            problems.append(f"--strategy ps needs 1 ≤ --servers < ranks, so that a worker "
                            f"remains: --servers {t.servers} on {count(world_size, 'rank')}")
        for name, mode in MODE_OF.items():
            if getattr(t, name) != DEFAULT[name] and t.ps_mode != mode:
                problems.append(f"{FLAG[name]} goes with --ps-mode {mode}, not {t.ps_mode}")
        for name, least in LEAST.items():
            if getattr(t, name) < least:
                problems.append(f"{FLAG[name]} must be at least {least}; got {getattr(t, name)}")
        if t.n_push > 1 and t.save_every % t.n_push:
            problems.append(f"--save-every ({t.save_every}) must be a multiple of --n-push "
                            f"({t.n_push}): a checkpoint is taken when no worker holds an "
                            "unpushed gradient")
        return problems

    def workers(self, c, world_size: int) -> int:
        return world_size - c.train.servers

    def computing(self, c, world_size: int) -> int:
        return world_size - c.train.servers

    def describe(self, cfg, shape, world_size: int):
        t = cfg.train
        variant = {"sync": ps.SyncParameterServer, "locked": ps.LockedParameterServer,
                   "ssp": ps.SSPParameterServer, "async": ps.AsyncParameterServer}[t.ps_mode]
        return variant.describe(shape, world_size, t.servers, t.n_push, t.n_fetch)

    def build(self, cfg, task, make_optimizer, mesh):
        """The variant ``--ps-mode`` names, training ``task``; rank 0 says the roles. A
        server's fp32 key range is its own master: it steps it with the rule of
        ``make_optimizer``'s mixed-precision wrapper, whose loss scaler (fp16's, the task's)
        each rank answers as it judges its steps."""
        t = cfg.train
        args = (task.model, make_optimizer, task, mesh)
        common = {"servers": t.servers, "grad_clip": cfg.optim.grad_clip}
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
        if mesh.world.rank == 0:
            print(f"parameter servers ({rule}): the key ranges and their optimizer state live "
                  f"on the host of {_span(0, t.servers)}; the workers are "
                  f"{_span(t.servers, mesh.world.size)}", flush=True)
        return strategy


def _span(first: int, stop: int) -> str:
    return f"rank {first}" if stop == first + 1 else f"ranks {first}–{stop - 1}"
