"""Hogwild on the command line: its flags, rules, the window it lives in, and its builder."""

from __future__ import annotations

from dataclasses import dataclass

from ...parallel.hogwild import Hogwild, LockedHogwild
from ..option import opt
from .family import Family

HOGWILD = ("hogwild",)


@dataclass(frozen=True)
class HogwildFlags:
    lock: bool = opt(False, "hogwild: one writer at a time under the window's exclusive lock "
                            "(the spec beside lock-free Hogwild)", owners=HOGWILD)
    window: str = opt("auto", "hogwild: where the parameters live: a node's shared memory, "
                              "rank 0's one-sided window (across nodes), or auto (shared when "
                              "every rank is on one node)", choices=("auto", "shared",
                                                                     "one-sided"),
                      owners=HOGWILD)


class HogwildFamily(Family):
    """``--strategy hogwild``: every rank a worker on θ in a shared or one-sided window."""

    names = {"hogwild": "Hogwild (lock-free SGD on shared parameters)"}
    flags = HogwildFlags

    def problems(self, c, world_size: int) -> list[str]:
        o, t, problems = c.optim, c.train, []
        if o.optimizer != "sgd" or o.momentum or o.weight_decay:
            problems.append(f"--strategy hogwild writes the plain SGD step θ_v ← θ_v − η g_v: "
                            f"it needs --optimizer sgd with no --momentum or --weight-decay; "
                            f"got {o.optimizer}, momentum {o.momentum}, weight decay "
                            f"{o.weight_decay}")
        if t.lock and t.window == "one-sided":
            problems.append("--lock takes the shared window's exclusive lock: it goes with "
                            "--window shared or auto, not one-sided")
        return problems

    def node_problems(self, cfg, world_size: int, on_node: int) -> list[str]:
        """A shared window needs every rank on one node (``on_node`` ranks share this one's)."""
        t = cfg.train
        shared = t.strategy == "hogwild" and (t.window == "shared" or t.lock)
        if shared and on_node != world_size:
            return [f"--strategy hogwild {'--lock' if t.lock else '--window shared'} maps one "
                    f"shared window, which needs every rank on one node; {on_node} of the "
                    f"{world_size} ranks share this one's (use --window one-sided)"]
        return []

    def describe(self, cfg, shape, world_size: int):
        t = cfg.train
        if t.lock:
            return LockedHogwild.describe(shape, world_size)
        return Hogwild.describe(shape, world_size, window=t.window)

    def build(self, cfg, task, make_optimizer, mesh):
        """Hogwild in the window ``--window`` names (auto: shared when every rank is on one
        node), or with ``--lock`` its locked spec, in the shared one; rank 0 says where θ
        lives."""
        t, comm, clip = cfg.train, mesh.world, cfg.optim.grad_clip
        if t.lock:
            window = "shared"
            strategy = LockedHogwild(task.model, make_optimizer, task, mesh, grad_clip=clip)
        else:
            window = t.window if t.window != "auto" else \
                "shared" if comm.local_size == comm.size else "one-sided"
            strategy = Hogwild(task.model, make_optimizer, task, mesh, window=window,
                               grad_clip=clip)
        if comm.rank == 0:
            where = "a shared-memory window every rank maps" if window == "shared" else \
                "rank 0's one-sided window (gets and atomic adds)"
            rule = "one writer at a time, under an exclusive lock" if t.lock else "lock-free"
            print(f"hogwild ({rule}): the parameters live once, in {where}; all {comm.size} "
                  f"ranks are workers", flush=True)
        return strategy
