"""What a training step holds: its measured peak beside the memory estimate's, on one rank."""

from __future__ import annotations

from ...plan.traced import traced
from ...train import load_config
from ...train.memory import estimate, measurable
from ...train.memory_models import MiB

MODELS = {"gpt": [], "gpt, dropout 0.1": ["--dropout", "0.1"], "lstm": ["--model", "lstm"]}
QUICK = ["--batch-size", "4", "--seq-len", "16"]


def held(comm, device: str, quick: bool) -> list[dict]:
    """Per default model of the training command, its own two steps: the flags, the peak of
    their arrays measured (``scratchpar.peak``) and expected (``train/memory.py``), in MiB, and
    the error. The graph keeps what backward reads (``autograd.tensor.Context``): here it shows."""
    rows = []
    for name, more in MODELS.items():
        flags = [*more, *(QUICK if quick else []), "--device", device]
        cfg = load_config([*flags, "--steps", "2", "--warmup", "0"], world_size=1)
        expected = measurable(cfg, estimate(cfg, 1, bound=False))
        peak = traced(comm, flags)
        rows.append({"model": name, "flags": " ".join(more) or "defaults",
                     "measured_mib": peak / MiB, "expected_mib": expected / MiB,
                     "error": expected / peak - 1})
    return rows
