"""The rules of the mesh flags: pipeline stages, replicas and tensor-parallel ranks."""

from __future__ import annotations

MESH_STRATEGIES = ("pipeline", "hybrid")
TENSOR_MODELS = ("gpt", "mlp")  # the models with a tensor-parallel form
UNLAYERED_MODELS = ("logreg", "factors")  # one lookup and a sum: nothing to split into stages


def pipeline_layers(m) -> int:
    """How many layers the model lists for pipelining (``pipeline_layers()``): the GPT's and
    the recurrent models' embedding, blocks or layers, and head; the MLP's Linear layers."""
    return len(m.hidden_sizes) + 1 if m.kind == "mlp" else m.n_layers + 2


def mesh_problems(c, world_size: int) -> list[str]:
    """Every reason the mesh flags cannot run on ``world_size`` ranks (DESIGN.md §2: pp >
    layers, tp not dividing heads, batch not divisible into micro-batches, dp·pp·tp ≠ world
    size, …)."""
    m, t = c.model, c.train
    problems = []
    if m.tie_embeddings and m.kind != "gpt":
        problems.append(f"--tie-embeddings ties the GPT's head to its embedding; model {m.kind} "
                        "has no such pair")
    tensor = [flag for flag, value, default in (("--tp", t.tp, 1),
                                                ("--sequence-parallel", t.sequence_parallel,
                                                 False)) if value != default]
    if t.strategy != "hybrid" and tensor:
        problems.append(f"{', '.join(tensor)} go{'es' if len(tensor) == 1 else ''} with "
                        f"--strategy hybrid, not {t.strategy}")
    if t.strategy not in MESH_STRATEGIES:
        given = [flag for flag, value, default in (("--pp", t.pp, 1), ("--dp", t.dp, None),
                                                   ("--microbatches", t.microbatches, None),
                                                   ("--virtual", t.virtual, 1)) if value != default]
        if given:
            problems.append(f"{', '.join(given)} go{'es' if len(given) == 1 else ''} with "
                            f"--strategy pipeline or hybrid, not {t.strategy}")
        return problems
    if m.kind in UNLAYERED_MODELS:
        return problems + [f"--strategy {t.strategy} splits a model's layers into stages; model "
                           f"{m.kind} has none (use single, dp, dp-naive, local-sgd, zero, ps, "
                           "hogwild or easgd)"]
    from ..parallel.pipeline.schedules import requirements

    bad = [f"{flag} must be at least 1; got {value}" for flag, value in
           (("--pp", t.pp), ("--tp", t.tp), ("--dp", t.dp), ("--microbatches", t.microbatches),
            ("--virtual", t.virtual)) if value is not None and value < 1]
    if bad:
        return problems + bad
    dp = t.replicas(world_size)
    stage = f"--pp {t.pp}" + (f" × --tp {t.tp}" if t.strategy == "hybrid" else "")
    if t.dp is None and world_size % (t.pp * t.tp):
        problems.append(f"{stage} does not divide the world of {world_size} ranks into "
                        f"replicas of the pipeline; launch a multiple of {t.pp * t.tp} ranks")
    elif dp * t.pp * t.tp != world_size:
        problems.append(f"--dp {dp} × {stage} = {dp * t.pp * t.tp} ranks, but the world has "
                        f"{world_size}")
    problems += requirements(t.pp_schedule, t.pp, t.m, t.virtual)
    layers = pipeline_layers(m)
    if t.pp * t.virtual > layers:
        problems.append(f"--pp {t.pp} × --virtual {t.virtual} = {t.pp * t.virtual} stages, but "
                        f"model {m.kind} lists only {layers} layers to split")
    if dp >= 1 and t.batch_size // dp < t.m:
        problems.append(f"train.batch_size {t.batch_size} over {dp} replica(s) leaves "
                        f"{t.batch_size // dp} rows for the smallest; it cannot split into "
                        f"--microbatches {t.m} (give --batch-size at least {dp * t.m})")
    if m.tie_embeddings and t.pp_schedule == "pipedream":
        problems.append("--tie-embeddings with --pp-schedule pipedream: the two copies would be "
                        "updated at different times and drift apart; untie them or use a "
                        "flushing schedule")
    if t.strategy == "hybrid":
        problems += tensor_problems(c)
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
              + ([("data.vocab_size", d.vocab_size)] if d.source == "synthetic" else [])
              if m.kind == "gpt" else [("model.hidden_sizes", h) for h in m.hidden_sizes])
    for name, n in splits:
        if n >= 1 and n % t.tp:
            problems.append(f"--tp {t.tp} must divide {name} ({n}): each tensor-parallel rank "
                            "holds an equal share")
    return problems
