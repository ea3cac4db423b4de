"""ZeRO's model states per rank (Rajbhandari et al. 2020, §5 and Figure 1), in bytes."""

from __future__ import annotations

from ..parallel.zero.formula import formula


def zero_states(cfg, world_size: int, params: int, largest: int, s: int, moments: int,
                vocab: int) -> tuple[int, int, int, int]:
    """Parameters, gradients and optimizer state one rank of N = ``world_size`` holds in a
    step of ``--strategy zero``, for Ψ = ``params`` elements of ``s`` bytes (the largest
    ``largest``) and ``moments`` optimizer arrays per element; and the largest chunk the
    optimizer steps at once, which sizes its work arrays.

    The paper's figures come from :func:`~scratchpar.parallel.zero.formula.formula`
    (Rajbhandari et al. 2020, Figure 1). With ``--offload cpu`` the host's share (Ren et al.
    2021) counts with the optimizer state, on the CPU the same memory, except the gradient
    chunk: the host's copy stands in for the device's, counted once, with the gradients.
    Beside them, what this engine holds:

    - stage 3: the units it holds gathered at once (:func:`units`);
    - a group packed into a new bucket beside the gradients it copies (a bucket, or in stage 3
      a unit), and the scratch chunk each reduce-scatter in flight takes, sΨ/N for all;
    - stages 2 and 3: up to sΨ of buckets in flight and gradients waiting for theirs, a
      bound: reduce-scatters advance only when polled between gradients, and start in order,
      so a bucket that completes early waits for the ones before it."""
    t = cfg.train
    plain = formula(t.zero_stage, params, world_size, s, moments)  # the device's, no offload
    paper = formula(t.zero_stage, params, world_size, s, moments, t.offload == "cpu")
    moved = plain["gradients"] - paper["gradients"]  # a gradient chunk offload moves to the host
    full, shard = params * s, shard_bytes(params, world_size, s)
    bucket = min(max(t.bucket_bytes, largest * s), full)  # a larger parameter fills one alone
    group, gathered = (bucket // s, 0) if t.zero_stage < 3 else units(cfg, vocab, params)
    in_flight = full if t.zero_stage >= 2 else 0
    return (plain["parameters"] + gathered * s,
            plain["gradients"] + group * s + shard + in_flight,  # the moved chunk, once
            paper["optimizer"] + paper.get("host", 0) - moved, shard_bytes(group, world_size, s))


def shard_bytes(params: int, world_size: int, s: int) -> int:
    """Bytes of rank 0's 1/N of ``params`` elements: ⌈Ψ/N⌉ (it holds the larger chunks)."""
    return -(-params // max(world_size, 1)) * s


def units(cfg, vocab: int, params: int) -> tuple[int, int]:
    """ZeRO-3's largest group, and the most it holds gathered at once, in elements. A unit is
    what one of ``pipeline_layers()`` alone holds; the root group, gathered for the whole step,
    what several share (the tied embedding). A stack of layers holds up to three units at once
    in backward: the one it leaves until its last gradient is final, the one it enters, and the
    next one, prefetched. A recurrent model's backward runs through every layer's time steps
    together, so all its units may be gathered (measured: all but the head); a model that lists
    no layers (the sparse problems' lookups) is one root group."""
    m, t = cfg.model, cfg.data.seq_len
    if m.kind == "gpt":
        c, v = m.d_model, vocab
        tied = v * c if m.tie_embeddings else 0
        sizes = [v * c + t * c - tied, v * c + 2 * c - tied,  # embedding; final norm and head
                 *[12 * c * c + 13 * c] * min(m.n_layers, 3)]  # the three largest blocks
        return max(*sizes, tied), sum(sorted(sizes)[-3:]) + tied
    if m.kind == "mlp":
        dims = [cfg.data.n_features, *m.hidden_sizes, cfg.data.n_classes]
        sizes = [i * o + o for i, o in zip(dims[:-1], dims[1:])]
        return max(sizes), sum(sorted(sizes)[-3:])
    if m.kind in ("lstm", "rnn"):
        e, h, g, v = m.d_model, m.d_hidden, 4 if m.kind == "lstm" else 1, vocab
        stacked = (h + 1) * g * h + h * g * h if m.n_layers > 1 else 0
        return max(v * e, (e + 1) * g * h + h * g * h, stacked, (h + 1) * v), params
    return params, params
