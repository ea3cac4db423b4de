"""What splitting a layer over ranks asks of the run, in the command line's words: ``--tp``
splits its matrices, ``--cp`` its sequences."""

from __future__ import annotations

from ...comm.chunks import counts

SCHEMES = ("ring", "allgather", "ulysses")
LAYOUTS = ("zigzag", "contiguous")
TENSOR_MODELS = ("gpt", "mlp")  # the models with a tensor-parallel form


def context_problems(c) -> list[str]:
    """Every reason ``--cp`` cannot split this run's sequences (Dubey et al. 2024, §3.3.2: a
    zig-zag layout cuts each sequence into 2·cp equal chunks; Jacobs et al. 2023: Ulysses shares
    a rank's heads over cp)."""
    m, d, t = c.model, c.data, c.train
    if t.cp == 1:
        return []
    if m.kind != "gpt":
        return [f"--cp {t.cp} splits a transformer's sequence over ranks; model {m.kind} has "
                "none (use --cp 1)"]
    problems = []
    pieces = 2 * t.cp if t.cp_layout == "zigzag" else t.cp
    if d.seq_len % pieces:
        problems.append(f"--cp {t.cp} with the {t.cp_layout} layout cuts each sequence into "
                        f"{pieces} equal chunks: --seq-len {d.seq_len} does not divide by "
                        f"{pieces}")
    if m.dropout > 0:
        problems.append(f"--cp {t.cp} runs without dropout (--dropout {m.dropout}): a rank "
                        "holds 1/cp of a sequence, so it cannot draw one device's mask of the "
                        "whole")
    groups = counts(m.groups, t.tp)  # a tp rank's key/value heads, each with its query heads
    named = "model.kv_heads" if m.kv_heads else "model.n_heads"
    if t.cp_attention == "ulysses" and any(g % t.cp for g in groups):
        problems.append(f"--cp-attention ulysses shares each tensor-parallel rank's key/value "
                        f"heads over the {t.cp} cp ranks: {named} {m.groups} over --tp {t.tp} "
                        f"gives {max(groups)}, which does not divide by --cp {t.cp}")
    if t.pp_schedule == "pipedream":
        problems.append("--cp runs in the synchronous pipeline; --pp-schedule pipedream is "
                        "--strategy pipeline's")
    return problems


def tensor_problems(c) -> list[str]:
    """Every reason ``--tp`` cannot split the model (Megatron splits heads, hidden units and
    the vocabulary evenly)."""
    m, d, t = c.model, c.data, c.train
    problems = []
    if t.pp_schedule == "pipedream":
        problems.append("--strategy hybrid runs the synchronous pipeline; --pp-schedule "
                        "pipedream updates per micro-batch (use --strategy pipeline for it)")
    if t.sequence_parallel and m.kind != "gpt":
        problems.append(f"--sequence-parallel shards a transformer's sequence; model {m.kind} "
                        "has none")
    if t.tp == 1:
        return problems
    if m.kind not in TENSOR_MODELS:
        problems.append(f"--tp {t.tp}: model {m.kind} has no tensor-parallel form (gpt and mlp "
                        "do); use --tp 1")
        return problems
    splits = ([("model.n_heads", m.n_heads), ("model.d_model", m.d_model)]
              + [(f"model.{name}", n) for name, n in (("kv_heads", m.kv_heads),
                                                      ("d_ff", m.d_ff)) if n]
              + ([("data.vocab_size", d.vocab_size)] if d.source == "synthetic" else [])
              if m.kind == "gpt" else [("model.hidden_sizes", h) for h in m.hidden_sizes])
    for name, n in splits:
        if n >= 1 and n % t.tp:
            problems.append(f"--tp {t.tp} must divide {name} ({n}): each tensor-parallel rank "
                            "holds an equal share")
    return problems
