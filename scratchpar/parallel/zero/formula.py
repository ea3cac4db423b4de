"""The bytes per rank that ZeRO's paper gives each stage, for the ledger's figures to meet."""

from __future__ import annotations


def formula(stage: int, psi: int, ranks: int, itemsize: int, moments: int,
            offload: bool = False) -> dict[str, int]:
    """Bytes one of ``ranks`` ranks holds for Ψ = ``psi`` parameters of ``itemsize`` bytes
    and ``moments`` optimizer arrays per parameter (Adam 2, momentum 1, plain SGD 0), by part.

    Rajbhandari et al. 2020, §5 and Figure 1, with K = moments·itemsize: data parallelism
    (stage 0) holds sΨ + sΨ + KΨ; stage 1 divides the optimizer state by N, stage 2 the
    gradient too, stage 3 the parameters too. For Adam in float32 (s = 4, K = 8): 16Ψ,
    8Ψ + 8Ψ/N, 4Ψ + 12Ψ/N and 16Ψ/N. With offload the optimizer state, the gradient chunks
    and a master copy of the parameter chunks are host memory, (2s + K)Ψ/N, and the device
    keeps no gradient beyond its buckets from stage 2 on (Ren et al. 2021, §4)."""
    whole, state = itemsize * psi, moments * itemsize * psi
    chunk = -(-psi // ranks)  # ⌈Ψ/N⌉ elements: rank 0's chunks are the larger ones
    shard = {"p": itemsize * chunk, "g": itemsize * chunk, "k": moments * itemsize * chunk}
    parts = {"parameters": whole if stage < 3 else shard["p"],
             "gradients": whole if stage < 2 else shard["g"],
             "optimizer": state if stage < 1 else shard["k"]}
    if offload:
        parts["host"] = parts["optimizer"] + shard["g"] + shard["p"]
        parts["optimizer"] = 0
        if stage >= 2:
            parts["gradients"] = 0
    return parts
