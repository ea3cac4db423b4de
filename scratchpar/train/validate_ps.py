"""The rules of the parameter-server flags: roles, consistency mode and its knobs."""

from __future__ import annotations

PS_DEFAULTS = {"servers": 1, "ps_mode": "sync", "staleness": 2, "warmup_sync": 0, "n_push": 1,
               "n_fetch": 1}
FLAG = {name: "--" + name.replace("_", "-") for name in PS_DEFAULTS}
MODE_OF = {"staleness": "ssp", "warmup_sync": "async", "n_push": "async", "n_fetch": "async"}


def ps_problems(c, world_size: int) -> list[str]:
    """Every reason the parameter-server flags cannot run on ``world_size`` ranks."""
    t, problems = c.train, []
    set_flags = [name for name, default in PS_DEFAULTS.items() if getattr(t, name) != default]
    if t.strategy != "ps":
        if set_flags:
            verb = "goes" if len(set_flags) == 1 else "go"
            problems.append(f"{', '.join(FLAG[n] for n in set_flags)} {verb} with --strategy "
                            f"ps, not {t.strategy}")
        return problems
    if not 1 <= t.servers < world_size:
        problems.append(f"--strategy ps needs 1 ≤ --servers < ranks, so that a worker remains: "
                        f"--servers {t.servers} on {world_size} rank(s)")
    for name, mode in MODE_OF.items():
        if name in set_flags and t.ps_mode != mode:
            problems.append(f"{FLAG[name]} goes with --ps-mode {mode}, not {t.ps_mode}")
    for name, least in (("staleness", 0), ("warmup_sync", 0), ("n_push", 1), ("n_fetch", 1)):
        if getattr(t, name) < least:
            problems.append(f"{FLAG[name]} must be at least {least}; got {getattr(t, name)}")
    if t.n_push > 1 and t.save_every % t.n_push:
        problems.append(f"--save-every ({t.save_every}) must be a multiple of --n-push "
                        f"({t.n_push}): a checkpoint is taken when no worker holds an unpushed "
                        "gradient")
    return problems
