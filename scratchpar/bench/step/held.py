"""What a training step holds: the training command's own two steps of its default models on
one rank, the peak of their arrays measured (``scratchpar.peak``) beside the memory estimate's
expected peak (``train/memory.py``). The autograd graph keeps what backward reads
(``autograd.tensor.Context``); this table is where that shows."""

from __future__ import annotations

from ...plan.traced import traced
from ...train import load_config
from ...train.memory import estimate, measurable

MODELS = {"gpt": [], "gpt, dropout 0.1": ["--dropout", "0.1"], "lstm": ["--model", "lstm"]}
QUICK = ["--batch-size", "4", "--seq-len", "16"]
MiB = 2**20


def held(comm, device: str, quick: bool) -> list[dict]:
    """Per model: its flags, the measured and the expected peak (MiB) and the error."""
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
