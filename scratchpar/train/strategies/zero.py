"""ZeRO on the command line: the stage and the offload, and the stage's strategy."""

from __future__ import annotations

from dataclasses import dataclass

from ...parallel import ZeRO1, ZeRO2, ZeRO3
from ..option import opt
from .family import OwnPieces

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
    global batch as dp does, so dp's rules are its own."""

    names = {"zero": "ZeRO (data parallel with the model states sharded over the ranks: "
                     "--zero-stage)"}
    flags = ZeroFlags

    def describe(self, cfg, shape, world_size: int):
        t = cfg.train
        return STAGES[t.zero_stage].describe(shape, world_size, t.bucket_bytes,
                                             t.offload == "cpu")

    def draws_parts(self, cfg) -> bool:
        return cfg.train.zero_stage == 3  # ZeRO-3 draws its chunks; stages 1, 2 hold it whole

    def build(self, cfg, task, make_optimizer, mesh):
        t = cfg.train
        return STAGES[t.zero_stage](task.model, make_optimizer, task, mesh,
                                    bucket_bytes=t.bucket_bytes, grad_clip=cfg.optim.grad_clip,
                                    offload=t.offload == "cpu")
