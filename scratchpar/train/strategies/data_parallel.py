"""One device, data parallelism and local SGD on the command line: their flags and builders."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...autograd.precision import WIDE
from ...parallel import (
    CapturedDataParallel,
    DataParallel,
    DataParallelNaive,
    LocalSGD,
    SingleDevice,
)
from ...parallel.noise import NoiseProbe
from ..option import opt
from .family import Family

MIB = 2**20


@dataclass(frozen=True)
class BucketFlags:
    """Taken by any strategy (none owns them): every bucketed strategy reads ``bucket_mb``
    (dp, local-sgd, zero, the pipelines' replicas, synchronous EASGD), and local SGD's knobs
    are inert elsewhere."""

    bucket_mb: float = opt(1.0, "dp, local-sgd, zero: bucket size in MiB (gradients reduced; "
                                "models averaged)")
    local_sgd_every: int = opt(8, "local-sgd: average the models every this many steps "
                                  "(0 = once, at the end)")
    local_sgd_warmup: int = opt(0, "local-sgd: synchronous (dp) steps before local ones")
    noise_scale: bool = opt(False, "dp, dp-naive, single: log the gradient noise scale B_simple "
                                   "(rows) from every rank's gradient and the reduced one "
                                   "(McCandlish et al. 2018): one more all-reduce of 4 numbers "
                                   "a step; single: from the batch's two halves",
                            owners=("single", "dp", "dp-naive"))
    cuda_graph: bool = opt(False, "single, dp, --device cuda: capture the step's forward and "
                                  "backward (and dp's bucket packing) as a CUDA graph once "
                                  "its shapes are fixed, and replay it "
                                  "(scratchpar/kernels/graph.py)",
                           owners=("single", "dp"))
    grad_reduce: str = opt("compute", "dp, dp-naive under --precision fp16|bf16: sum the "
                                      "gradients over ranks in the parameters' 16 bits "
                                      "(compute: half the bytes, as DeepSpeed and FSDP do) or "
                                      "in fp32 (no rounding in the sum, as Megatron-LM for bf16)",
                           choices=("compute", "fp32"), owners=("dp", "dp-naive"))

    @property
    def bucket_bytes(self) -> int:
        """``bucket_mb`` in bytes, as the strategies take it (for a finite bucket_mb)."""
        return round(self.bucket_mb * MIB)

    def value_problems(self) -> list[str]:
        """The bucket size and local SGD's knobs, whichever strategy runs."""
        problems = []
        if not self.bucket_mb > 0:
            problems.append(f"train.bucket_mb must be positive; got {self.bucket_mb}")
        elif self.bucket_mb < math.inf and self.bucket_bytes < 1:
            problems.append(f"train.bucket_mb ({self.bucket_mb}) rounds to 0 bytes; give at "
                            f"least one byte, {1 / MIB:.2g} MiB")
        for name in ("local_sgd_every", "local_sgd_warmup"):
            if getattr(self, name) < 0:
                problems.append(f"train.{name} must be non-negative; got {getattr(self, name)}")
        return problems


class DataParallelFamily(Family):
    """``--strategy single`` (one device, no MPI), ``dp``, ``dp-naive`` and ``local-sgd``."""

    names = {"single": "one device", "dp": "data parallel (bucketed, overlapped)",
             "dp-naive": "data parallel with one all-reduce per parameter",
             "local-sgd": "local SGD (periodic model averaging)"}
    flags = BucketFlags

    def problems(self, c, world_size: int) -> list[str]:
        """One device's rules: no trace, one rank; a noise scale from shards needs two; fp32
        sums need 16-bit gradients."""
        t, problems = c.train, []
        if t.grad_reduce == "fp32" and t.precision == "fp32":
            problems.append("--grad-reduce fp32 sums 16-bit gradients in fp32; it goes with "
                            "--precision fp16 or bf16")
        if t.strategy == "single":
            if t.trace is not None:
                problems.append("--trace records a parallel strategy's regions; --strategy "
                                "single has none")
            if world_size != 1:
                problems.append(f"--strategy single runs on one rank; launched on {world_size}")
        problems += _graph_problems(c)
        if t.noise_scale and world_size == 1 and t.strategy in ("dp", "dp-naive"):
            problems.append(f"--noise-scale with --strategy {t.strategy} compares the ranks' "
                            "shards, and needs 2 ranks or more; on one device, --strategy "
                            "single compares the batch's two halves")
        return problems

    def describe(self, cfg, shape, world_size: int):
        t = cfg.train
        if t.strategy == "single":
            return SingleDevice.describe(shape)
        wide = t.grad_reduce == "fp32"  # 16-bit gradients summed in fp32
        if t.strategy == "dp-naive":
            return DataParallelNaive.describe(shape, world_size, wide)
        if t.strategy == "local-sgd":
            return LocalSGD.describe(shape, world_size, t.local_sgd_every, t.bucket_bytes)
        return DataParallel.describe(shape, world_size, t.bucket_bytes, wide)

    def saved(self, cfg, shape, world_size: int) -> int:
        """Local SGD gathers every replica on rank 0; the others write the state they hold."""
        if cfg.train.strategy != "local-sgd":
            return 0
        return world_size * super().saved(cfg, shape, world_size)

    def build(self, cfg, task, make_optimizer, mesh):
        strategy = self._strategy(cfg, task, make_optimizer, mesh)
        if cfg.train.noise_scale:
            strategy.attach(NoiseProbe())
        return strategy

    def _strategy(self, cfg, task, make_optimizer, mesh):
        t, clip = cfg.train, cfg.optim.grad_clip
        if t.strategy == "single":
            return SingleDevice(task.model, make_optimizer, task, grad_clip=clip,
                                cuda_graph=t.cuda_graph)
        common = (task.model, make_optimizer, task, mesh)
        wide = WIDE if t.grad_reduce == "fp32" else None
        if t.strategy == "dp-naive":
            return DataParallelNaive(*common, grad_clip=clip, reduce_dtype=wide)
        if t.strategy == "local-sgd":
            return LocalSGD(*common, every=t.local_sgd_every, warmup=t.local_sgd_warmup,
                            grad_clip=clip, bucket_bytes=t.bucket_bytes)
        dp = CapturedDataParallel if t.cuda_graph else DataParallel
        return dp(*common, bucket_bytes=t.bucket_bytes, grad_clip=clip, reduce_dtype=wide)


def _graph_problems(c) -> list[str]:
    """What a captured step cannot hold: a graph is CUDA's; the noise scale's probes step in
    shards."""
    if not c.train.cuda_graph:
        return []
    problems = []
    if c.train.device != "cuda":
        problems.append(f"--cuda-graph captures the step as a CUDA graph: it needs --device "
                        f"cuda (got --device {c.train.device})")
    if c.train.noise_scale:
        problems.append("--cuda-graph and --noise-scale: the noise scale's shards step "
                        "uncaptured; choose one")
    return problems
