"""Every rule a Config must satisfy, checked at once so one error lists every violation."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

from ..data.synthetic import MAX_TABLE_ENTRIES, table_fits
from .experts import expert_problems
from .option import flag_of
from .strategies import FAMILIES, REGISTRY

LANGUAGE_MODELS = ("gpt", "lstm", "rnn")
MODELS = {"synthetic": LANGUAGE_MODELS, "text": LANGUAGE_MODELS, "classification": ("mlp",),
          "sparse-logreg": ("logreg",), "matrix-factorization": ("factors",)}  # what learns each
LAYERED = ("gpt", "lstm", "rnn", "mlp")  # the models that list their layers
AT_LEAST_ONE = ("model.d_model", "model.n_heads", "model.n_layers", "model.d_hidden",
                "data.seq_len", "data.n_features", "data.nnz", "data.n_users", "data.n_items",
                "data.rank", "train.steps", "train.batch_size", "train.log_every",
                "train.eval_batches", "train.max_bad_steps")


def validate(c, world_size: int = 1, planning: bool = False) -> list[str]:
    """The list of violations of Config ``c`` run on ``world_size`` ranks (empty when valid):
    each field's own, each section's, then each family of strategies' (its flags misused
    under another strategy, and its rules), and the share of the batch each rank needs.
    ``planning``: the run is priced, not started, so its data is never built: a synthetic
    language of a real vocabulary (51,200 symbols) is planned though its table is not built."""
    problems = (_field_problems(c) + _model_problems(c.model) + expert_problems(c)
                + _data_problems(c.data, c.model, planning) + _optim_problems(c.optim, c.train)
                + _run_problems(c.train, c.model.kind))
    for family in FAMILIES:
        problems += _misused(family, c.train)
        if c.train.strategy in family.names:
            problems += family.problems(c, world_size)
    return [in_flags(c, p) for p in problems + _share_problems(c, world_size)]


def in_flags(c, problem: str) -> str:
    """``problem`` with each field it names (``train.steps``) said as its flag (``--steps``):
    what the user typed on the command line, or finds in ``--help`` beside the TOML key."""
    flags = {f"{part.name}.{f.name}": flag_of(f) for part in dataclasses.fields(c)
             for f in dataclasses.fields(getattr(c, part.name))}
    return re.sub(r"\b(model|data|optim|train)\.(\w+)\b",
                  lambda match: flags.get(match[0], match[0]), problem)


def _field_problems(c) -> list[str]:
    """Each field's choices and finiteness, and the sizes that must be at least 1."""
    problems = []
    for part in dataclasses.fields(c):
        section = getattr(c, part.name)
        for f in dataclasses.fields(section):
            choices, value = f.metadata["choices"], getattr(section, f.name)
            if not (choices is None or value in choices):
                problems.append(f"{part.name}.{f.name} must be one of "
                                f"{', '.join(map(str, choices))}; got {value!r}")
            if f.metadata["kind"] is float and value is not None and not math.isfinite(value):
                problems.append(f"{part.name}.{f.name} must be a finite number; got {value}")
    for name in AT_LEAST_ONE:
        section, field = name.split(".")
        value = getattr(getattr(c, section), field)
        if value < 1:
            problems.append(f"{name} must be at least 1; got {value}")
    return problems


def _model_problems(m) -> list[str]:
    problems = []
    if not all(h >= 1 for h in m.hidden_sizes):
        problems.append(f"model.hidden_sizes must be positive; got {m.hidden_sizes}")
    if m.n_heads >= 1 and m.d_model % m.n_heads:
        problems.append(f"model.n_heads ({m.n_heads}) must divide model.d_model ({m.d_model})")
    if m.kv_heads < 0 or m.d_ff < 0:
        problems.append(f"model.kv_heads ({m.kv_heads}) and model.d_ff ({m.d_ff}) must be at "
                        "least 0 (0: their defaults)")
    elif m.n_heads >= 1 and m.n_heads % m.groups:
        problems.append(f"model.kv_heads ({m.kv_heads}) must divide model.n_heads "
                        f"({m.n_heads}): each key/value head serves as many query heads")
    if (m.kv_heads or m.d_ff) and m.kind != "gpt":
        problems.append(f"model.kv_heads and model.d_ff shape a GPT's blocks; model {m.kind} "
                        "has none")
    if not 0.0 <= m.dropout < 1.0:
        problems.append(f"model.dropout must be in [0, 1); got {m.dropout}")
    if m.tie_embeddings and m.kind != "gpt":
        problems.append(f"--tie-embeddings ties the GPT's head to its embedding; model {m.kind} "
                        "has no such pair")
    return problems


def _data_problems(d, m, planning: bool = False) -> list[str]:
    problems = []

    def need(ok: bool, message: str) -> None:
        if not ok:
            problems.append(message)

    need(d.vocab_size >= 4, f"data.vocab_size must be at least 4; got {d.vocab_size}")
    need(d.order >= 1, f"data.order must be at least 1; got {d.order}")
    need(planning or d.source != "synthetic" or d.vocab_size < 4 or d.order < 1
         or table_fits(d.vocab_size, d.order),
         f"the synthetic language's table has data.vocab_size**(data.order+1) = "
         f"{d.vocab_size}**{d.order + 1} entries, more than {MAX_TABLE_ENTRIES}; lower "
         f"--vocab-size or --order")
    need(d.mean_length > 0, f"data.mean_length must be positive; got {d.mean_length}")
    need(d.concentration > 0, f"data.concentration must be positive; got {d.concentration}")
    need(d.n_classes >= 2, f"data.n_classes must be at least 2; got {d.n_classes}")
    need(d.source != "sparse-logreg" or d.nnz < 1 or 2 * d.nnz <= d.n_features,
         f"data.nnz ({d.nnz}) must be at most half of data.n_features ({d.n_features}): a "
         f"sparse sample holds a few of the features")
    need(not d.noise < 0, f"data.noise must be non-negative; got {d.noise}")  # nan: not finite
    if d.source == "text":
        need(d.path is not None, "data.source text needs a file: --data PATH")
        kind = None if d.path is None else _file_kind(d.path)
        need(kind in (None, "file"), f"--data {d.path}: {kind}")
    need(0 < d.eval_fraction < 1, f"data.eval_fraction must be in (0, 1): a part of the text "
                                  f"to hold out; got {d.eval_fraction}")
    need(d.path is None or d.source == "text", f"--data PATH goes with data.source text, "
                                               f"not {d.source}")
    need(m.kind in MODELS.get(d.source, (m.kind,)),
         f"model {m.kind} cannot learn data.source {d.source}: use mlp with classification, "
         f"gpt, lstm or rnn with synthetic or text, logreg with sparse-logreg and factors with "
         f"matrix-factorization (the source's own model is the default)")
    return problems


def _optim_problems(o, t) -> list[str]:
    checks = [
        (o.lr > 0, f"optim.lr must be positive; got {o.lr}"),
        (0.0 <= o.momentum < 1.0, f"optim.momentum must be in [0, 1); got {o.momentum}"),
        (o.weight_decay >= 0, f"optim.weight_decay must be non-negative; got {o.weight_decay}"),
        (o.grad_clip >= 0, f"optim.grad_clip must be non-negative; got {o.grad_clip}"),
        (o.warmup >= 0, f"optim.warmup must be non-negative; got {o.warmup}"),
        (o.warmup < t.steps or t.steps < 1,  # a bad --steps is said once, above
         f"optim.warmup ({o.warmup}) must be less than train.steps ({t.steps})"),
        (o.min_lr >= 0 and (o.lr <= 0 or o.min_lr <= o.lr),
         f"optim.min_lr must be in [0, optim.lr]; got {o.min_lr}")]
    return [message for ok, message in checks if not ok]


ONE_LOSS = ("single", "dp", "dp-naive", "zero")  # every rank reads the step's reduced loss


def _run_problems(t, kind: str) -> list[str]:
    checks = [
        (t.save_every >= 0, f"train.save_every must be non-negative; got {t.save_every}"),
        (t.save_every == 0 or t.save is not None, "train.save_every needs --save DIR"),
        (t.stop_after is None or 1 <= t.stop_after <= t.steps,
         f"train.stop_after must be in [1, steps]; got {t.stop_after}"),
        (t.target_loss is None or t.strategy in ONE_LOSS,
         f"--target-loss goes with --strategy {' or '.join(ONE_LOSS)}, not {t.strategy}: "
         "those stop where every rank reads one reduced loss"),
        (t.seed >= 0, f"train.seed must be non-negative; got {t.seed}"),
        (t.precision == "fp32" or t.dtype == "float32",
         f"--precision {t.precision} keeps fp32 masters: it goes with --dtype float32, not "
         f"{t.dtype}"),
        (t.precision != "bf16" or t.device == "cpu",
         f"--precision bf16 needs bfloat16 arrays, which CuPy lacks (--device {t.device}): "
         "use --precision fp16"),
        (t.recompute == "none" or kind in LAYERED,
         f"--recompute {t.recompute} recomputes the layers a model lists; model {kind} lists "
         f"none (use {', '.join(LAYERED)})"),
        (t.recompute != "selective" or kind == "gpt",
         f"--recompute selective recomputes attention; model {kind} has none (use full)"),
        (t.precision != "fp16" or t.pp_schedule != "pipedream",
         "--precision fp16 goes with the flushing schedules, not --pp-schedule pipedream: its "
         "stages update after each micro-batch on their own verdicts, so a loss scale that "
         "one stage halves would part from the scale the last stage multiplied the loss by "
         "(use --precision bf16, which needs no scale)")]
    return [message for ok, message in checks if not ok] + t.value_problems()


def _misused(family, t) -> list[str]:
    """"X goes with --strategy Y": the family's flags that were given a value (not their
    default) under a strategy that does not own them, one line per set of owners."""
    misused: dict[tuple, list[str]] = {}
    for f in dataclasses.fields(family.flags):
        owners = f.metadata["owners"]
        if owners and t.strategy not in owners and getattr(t, f.name) != f.default:
            misused.setdefault(owners, []).append(flag_of(f))
    return [f"{', '.join(flags)} {'goes' if len(flags) == 1 else 'go'} with --strategy "
            f"{' or '.join(owners)}, not {t.strategy}" for owners, flags in misused.items()]


def _share_problems(c, world_size: int) -> list[str]:
    """Each rank (or worker) that shares the global batch needs a row of it."""
    t, family = c.train, REGISTRY.get(c.train.strategy)
    sharing = None if family is None else family.workers(c, world_size)
    if t.batch_size < 1 or sharing is None or sharing < 1 or t.batch_size >= sharing:
        return []
    return [f"train.batch_size ({t.batch_size}) must be at least the number of "
            f"{'workers' if sharing < world_size else 'ranks'} ({sharing}): each needs a share "
            f"of the global batch"]


def _file_kind(path: str) -> str:
    """"file" for a regular file, else what is wrong with ``path``."""
    try:
        target = Path(path)
        return "file" if target.is_file() else "not a regular file" if target.exists() else \
            "no such file"
    except OSError as e:  # a name too long, a loop of links
        return f"cannot be looked up ({e.strerror})"
