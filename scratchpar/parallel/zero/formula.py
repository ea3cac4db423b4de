"""ZeRO's bytes per rank: the paper's figures for each stage, which the ledger's meet, and the
description of a stage, those figures with what this engine holds and sends beside them."""

from __future__ import annotations

from ..description import TOTALS, Description, Message, bucketed

PARTS = ("parameters", "gradients", "optimizer", "host")  # what the paper's formula counts


def formula(stage: int, psi: int, ranks: int, itemsize: int, k: int,
            offload: bool = False) -> dict[str, int]:
    """Bytes one of ``ranks`` ranks holds for Ψ = ``psi`` parameters of ``itemsize`` bytes
    and K = ``k`` bytes of optimizer state per parameter (``Shape.k``), by part.

    Rajbhandari et al. 2020, §5 and Figure 1: data parallelism (stage 0) holds
    sΨ + sΨ + KΨ. Stage 1 divides the optimizer state by N, stage 2 the gradient too, stage 3
    the parameters too. For Adam in float32 (s = 4, K = 8): 16Ψ, 8Ψ + 8Ψ/N, 4Ψ + 12Ψ/N and
    16Ψ/N; in mixed precision (s = 2, K = 12, the paper's own case): 16Ψ, 4Ψ + 12Ψ/N,
    2Ψ + 14Ψ/N and 16Ψ/N. With offload the optimizer state, the gradient chunks
    and a master copy of the parameter chunks are host memory, (2s + K)Ψ/N, and the device
    keeps no gradient beyond its buckets from stage 2 on (Ren et al. 2021, §4)."""
    whole, state = itemsize * psi, k * psi
    chunk = -(-psi // ranks)  # ⌈Ψ/N⌉ elements: rank 0's chunks are the larger ones
    shard = {"p": itemsize * chunk, "g": itemsize * chunk, "k": k * chunk}
    parts = {"parameters": whole if stage < 3 else shard["p"],
             "gradients": whole if stage < 2 else shard["g"],
             "optimizer": state if stage < 1 else shard["k"]}
    if offload:
        parts["host"] = parts["optimizer"] + shard["g"] + shard["p"]
        parts["optimizer"] = 0
        if stage >= 2:
            parts["gradients"] = 0
    return parts


def describe(stage: int, shape, world: int, bucket_bytes: int, offload: bool) -> Description:
    """What one of N = ``world`` ranks of ZeRO stage ``stage`` holds and sends each step: the
    paper's figures (:func:`formula`), and beside them what this engine holds:

    - stage 3: the layers it holds gathered at once (``shape.stack``, with the root group);
    - a group packed into a new bucket beside the gradients it copies (a bucket, or in stage 3
      a layer), and the scratch chunk each reduce-scatter in flight takes, sΨ/N for all;
    - stages 2 and 3: up to sΨ of buckets in flight and gradients waiting for theirs, a
      bound: reduce-scatters advance only when polled between gradients, and start in order,
      so a bucket that completes early waits for the ones before it.

    With ``offload`` the host's share (Ren et al. 2021) is ``on_host``, and counts with the
    optimizer state but for the gradient chunk: the host's copy stands in for the device's,
    counted once, with the gradients. Messages: each group's gradient reduce-scattered (behind
    backward from stage 2 on) and its parameters all-gathered after the update (stage 3: per
    layer, in forward and again in backward, behind the layer before it)."""
    s, k = shape.itemsize, shape.k
    plain = formula(stage, shape.psi, world, s, k)  # the device's, without offload
    paper = formula(stage, shape.psi, world, s, k, offload)
    moved = plain["gradients"] - paper["gradients"]  # a gradient chunk offload moves to the host
    full, shard = shape.bytes, s * -(-shape.psi // world)  # rank 0's chunks: the larger
    bucket = min(max(bucket_bytes, shape.largest * s), full)  # a larger parameter fills one
    group, gathered = (bucket // s, 0) if stage < 3 else \
        (max(shape.layer, shape.shared) or shape.psi, (shape.stack + shape.shared) or shape.psi)
    holds = {"parameters": plain["parameters"] + gathered * s,
             "gradients": plain["gradients"],
             "optimizer": paper["optimizer"] + paper.get("host", 0) - moved,
             "buffers": group * s + shard + (full if stage >= 2 else 0)}
    if stage < 3:  # DP's buckets
        scattered = bucketed(shape, bucket_bytes, "reduce-scatter", "dp",
                             "backward" if stage == 2 else "")
        gathers = bucketed(shape, bucket_bytes, "all-gather", "dp")
    else:  # a layer at a time, and the root group
        units = shape.depth + (shape.shared > 0)
        scattered = Message("reduce-scatter", "dp", -(-full // units), units, "backward")
        gathers = Message("all-gather", "dp", -(-full // units), 2 * units, "forward")
    sends = (scattered, gathers, Message("all-reduce", "dp", TOTALS, 1, "backward"),
             Message("all-reduce", "dp", 8, 1))  # the squared norm of every rank's chunks
    groups = int(scattered.count) if stage < 3 else units  # one flat shard each
    return Description(holds, sends, on_host=paper.get("host", 0),
                       chunk=-(-group // world), arrays=groups * shape.per_array)
