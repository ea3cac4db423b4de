"""The rules of Hogwild's and elastic averaging's flags."""

from __future__ import annotations

FLAGS = {"hogwild": {"lock": False, "window": "auto"},
         "easgd": {"easgd_mode": "sync", "rho": None, "tau": 4}}
MASTERED = ("async", "round-robin")  # the EASGD modes whose rank 0 is a master, not a worker


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def async_problems(c, world_size: int) -> list[str]:
    """Every reason the Hogwild and EASGD flags cannot run on ``world_size`` ranks."""
    o, t, problems = c.optim, c.train, []
    for strategy, defaults in FLAGS.items():
        given = [_flag(n) for n, default in defaults.items() if getattr(t, n) != default]
        if given and t.strategy != strategy:
            verb = "goes" if len(given) == 1 else "go"
            problems.append(f"{', '.join(given)} {verb} with --strategy {strategy}, not "
                            f"{t.strategy}")
    if t.strategy == "hogwild":
        if o.optimizer != "sgd" or o.momentum or o.weight_decay:
            problems.append(f"--strategy hogwild writes the plain SGD step θ_v ← θ_v − η g_v: "
                            f"it needs --optimizer sgd with no --momentum or --weight-decay; "
                            f"got {o.optimizer}, momentum {o.momentum}, weight decay "
                            f"{o.weight_decay}")
        if t.lock and t.window == "one-sided":
            problems.append("--lock takes the shared window's exclusive lock: it goes with "
                            "--window shared or auto, not one-sided")
    if t.strategy == "easgd":
        if t.easgd_mode in MASTERED and world_size < 2:
            problems.append(f"--easgd-mode {t.easgd_mode} needs a master and a worker: 2 ranks "
                            f"or more, not {world_size}")
        if t.rho is not None and not t.rho >= 0:
            problems.append(f"--rho must be non-negative; got {t.rho}")
        if t.tau < 1:
            problems.append(f"--tau must be at least 1; got {t.tau}")
        elif t.tau != FLAGS["easgd"]["tau"] and t.easgd_mode == "round-robin":
            problems.append("--tau goes with --easgd-mode sync or async: round-robin exchanges "
                            "with the master at every step")
    return problems


def workers(c, world_size: int) -> int:
    """The ranks that share each global batch: all but the servers or the master; round-robin
    hands the whole batch to one worker."""
    t = c.train
    if t.strategy == "ps":
        return world_size - t.servers
    if t.strategy == "easgd" and t.easgd_mode in MASTERED:
        return 1 if t.easgd_mode == "round-robin" else world_size - 1
    return world_size


def window_problems(c, world_size: int, on_node: int) -> list[str]:
    """A shared window needs every rank on one node (``on_node`` ranks share this one's)."""
    t = c.train
    shared = t.strategy == "hogwild" and (t.window == "shared" or t.lock)
    if shared and on_node != world_size:
        return [f"--strategy hogwild {'--lock' if t.lock else '--window shared'} maps one "
                f"shared window, which needs every rank on one node; {on_node} of the "
                f"{world_size} ranks share this one's (use --window one-sided)"]
    return []
