"""ZeRO on the command line: the stage, the offload and cp, and the stage's strategy."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...comm.mesh import Mesh
from ...parallel import ZeRO1, ZeRO2, ZeRO3
from ...parallel.context import traffic
from ..option import opt
from .family import OwnPieces
from .splits import context_problems

ZERO = ("zero",)
STAGES = {1: ZeRO1, 2: ZeRO2, 3: ZeRO3}


@dataclass(frozen=True)
class ZeroFlags:
    zero_stage: int = opt(1, "zero: what each of the N ranks keeps 1/N of (ZeRO, Rajbhandari "
                             "et al. 2020): 1 the optimizer state, 2 the gradients too, 3 the "
                             "parameters too, gathered layer by layer when used",
                          choices=(1, 2, 3), owners=ZERO)
    offload: str = opt("none", "zero: cpu keeps each rank's optimizer state and a master copy of "
                               "its shard of the parameters in host memory, and updates them "
                               "there (ZeRO-Offload, Ren et al. 2021)", choices=("none", "cpu"),
                       owners=ZERO)


class ZeroFamily(OwnPieces):
    """``--strategy zero``: data parallelism with the model states sharded; it shares the
    global batch as dp does, so dp's rules are its own. With ``--cp`` a GPT's sequences split
    over cp ranks too, and the states over all dp × cp of them."""

    names = {"zero": "ZeRO (data parallel with the model states sharded over the ranks: "
                     "--zero-stage)"}
    flags = ZeroFlags

    def problems(self, c, world_size: int) -> list[str]:
        """The world must split into replicas of ``--cp`` ranks, which ``--cp`` can split."""
        cp, problems = c.train.cp, context_problems(c)
        if cp >= 1 and world_size % cp:
            problems.insert(0, f"--cp {cp} does not divide the world of {world_size} ranks into "
                               "replicas")
        return problems

    def workers(self, c, world_size: int) -> int | None:
        """The replicas the global batch's rows are shared among: the world over ``--cp``."""
        return max(world_size // max(c.train.cp, 1), 1)

    def mesh(self, cfg, comm):
        """dp × cp: ``Mesh(comm, cp=--cp)``, pure data parallelism at ``--cp 1``."""
        return Mesh(comm, cp=cfg.train.cp)

    def describe(self, cfg, shape, world_size: int):
        """The stage's figures over the world (its chunks are every rank's), and under cp each
        layer's attention messages on a rank's positions of its replica's rows."""
        t = cfg.train
        described = STAGES[t.zero_stage].describe(shape, world_size, t.bucket_bytes,
                                                  t.offload == "cpu")
        if t.cp == 1:
            return described
        a = -(-t.batch_size // self.workers(cfg, world_size)) * shape.boundary // t.cp
        cp = traffic(t.cp_attention, t.cp, a, shape.depth, shape.itemsize,
                     cfg.model.per_group)
        return replace(described, sends=described.sends + cp)

    def draws_parts(self, cfg) -> bool:
        return cfg.train.zero_stage == 3  # ZeRO-3 draws its chunks; stages 1, 2 hold it whole

    def build(self, cfg, task, make_optimizer, mesh):
        t = cfg.train
        return STAGES[t.zero_stage](task.model, make_optimizer, task, mesh,
                                    bucket_bytes=t.bucket_bytes, grad_clip=cfg.optim.grad_clip,
                                    offload=t.offload == "cpu", attention=t.cp_attention,
                                    layout=t.cp_layout)
