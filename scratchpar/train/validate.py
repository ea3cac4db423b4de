"""Every rule a Config must satisfy, checked at once so one error lists every violation."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from ..data.synthetic import MAX_TABLE_ENTRIES, table_fits
from .config import MIB
from .validate_async import async_problems, workers
from .validate_mesh import MESH_STRATEGIES, mesh_problems
from .validate_ps import ps_problems
from .validate_zero import zero_problems

LANGUAGE_MODELS = ("gpt", "lstm", "rnn")
MODELS = {"synthetic": LANGUAGE_MODELS, "text": LANGUAGE_MODELS, "classification": ("mlp",),
          "sparse-logreg": ("logreg",), "matrix-factorization": ("factors",)}  # what learns each


def validate(c, world_size: int = 1) -> list[str]:
    """The list of violations of Config ``c`` run on ``world_size`` ranks (empty when valid)."""
    m, d, o, t = c.model, c.data, c.optim, c.train
    problems = []

    def need(ok: bool, message: str) -> None:
        if not ok:
            problems.append(message)

    for part in dataclasses.fields(c):
        section = getattr(c, part.name)
        for f in dataclasses.fields(section):
            choices, value = f.metadata["choices"], getattr(section, f.name)
            need(choices is None or value in choices,
                 f"{part.name}.{f.name} must be one of {', '.join(map(str, choices or ()))}; got "
                 f"{value!r}")
            need(f.metadata["kind"] is not float or value is None or math.isfinite(value),
                 f"{part.name}.{f.name} must be a finite number; got {value}")
    for name in ("model.d_model", "model.n_heads", "model.n_layers", "model.d_hidden",
                 "data.seq_len", "data.n_features", "data.nnz", "data.n_users",
                 "data.n_items", "data.rank", "train.steps", "train.batch_size",
                 "train.log_every", "train.eval_batches", "train.max_bad_steps"):
        value = getattr(getattr(c, name.split(".")[0]), name.split(".")[1])
        need(value >= 1, f"{name} must be at least 1; got {value}")
    need(all(h >= 1 for h in m.hidden_sizes), f"model.hidden_sizes must be positive; got "
                                              f"{m.hidden_sizes}")
    need(m.n_heads < 1 or m.d_model % m.n_heads == 0,
         f"model.n_heads ({m.n_heads}) must divide model.d_model ({m.d_model})")
    need(0.0 <= m.dropout < 1.0, f"model.dropout must be in [0, 1); got {m.dropout}")
    need(d.vocab_size >= 4, f"data.vocab_size must be at least 4; got {d.vocab_size}")
    need(d.order >= 1, f"data.order must be at least 1; got {d.order}")
    need(d.source != "synthetic" or d.vocab_size < 4 or d.order < 1
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
    need(d.path is None or d.source == "text", f"--data PATH goes with data.source text, "
                                               f"not {d.source}")
    need(m.kind in MODELS.get(d.source, (m.kind,)),
         f"model {m.kind} cannot learn data.source {d.source}: use mlp with classification, "
         f"gpt, lstm or rnn with synthetic or text, logreg with sparse-logreg and factors with "
         f"matrix-factorization (the source's own model is the default)")
    need(o.lr > 0, f"optim.lr must be positive; got {o.lr}")
    need(0.0 <= o.momentum < 1.0, f"optim.momentum must be in [0, 1); got {o.momentum}")
    need(o.weight_decay >= 0, f"optim.weight_decay must be non-negative; got {o.weight_decay}")
    need(o.grad_clip >= 0, f"optim.grad_clip must be non-negative; got {o.grad_clip}")
    need(o.warmup >= 0, f"optim.warmup must be non-negative; got {o.warmup}")
    need(o.warmup < t.steps, f"optim.warmup ({o.warmup}) must be less than train.steps "
                             f"({t.steps})")
    need(o.min_lr >= 0 and (o.lr <= 0 or o.min_lr <= o.lr),
         f"optim.min_lr must be in [0, optim.lr]; got {o.min_lr}")
    need(t.save_every >= 0, f"train.save_every must be non-negative; got {t.save_every}")
    need(t.save_every == 0 or t.save is not None, "train.save_every needs --save DIR")
    need(t.stop_after is None or 1 <= t.stop_after <= t.steps,
         f"train.stop_after must be in [1, steps]; got {t.stop_after}")
    need(t.seed >= 0, f"train.seed must be non-negative; got {t.seed}")
    need(t.bucket_mb > 0, f"train.bucket_mb must be positive; got {t.bucket_mb}")
    need(not 0 < t.bucket_mb < math.inf or t.bucket_bytes >= 1,
         f"train.bucket_mb ({t.bucket_mb}) rounds to 0 bytes; give at least one byte, "
         f"{1 / MIB:.2g} MiB")
    need(t.local_sgd_every >= 0, f"train.local_sgd_every must be non-negative; got "
                                 f"{t.local_sgd_every}")
    need(t.local_sgd_warmup >= 0, f"train.local_sgd_warmup must be non-negative; got "
                                  f"{t.local_sgd_warmup}")
    need(t.trace is None or t.strategy != "single",
         "--trace records a parallel strategy's regions; --strategy single has none")
    need(t.strategy != "single" or world_size == 1,
         f"--strategy single runs on one rank; launched on {world_size}")
    problems += mesh_problems(c, world_size)
    problems += ps_problems(c, world_size)
    problems += async_problems(c, world_size)
    problems += zero_problems(c)
    sharing = workers(c, world_size)
    need(t.batch_size < 1 or t.strategy in MESH_STRATEGIES or sharing < 1
         or t.batch_size >= sharing,
         f"train.batch_size ({t.batch_size}) must be at least the number of "
         f"{'workers' if sharing < world_size else 'ranks'} ({sharing}): each needs a share of "
         f"the global batch")
    return problems


def _file_kind(path: str) -> str:
    """"file" for a regular file, else what is wrong with ``path``."""
    try:
        target = Path(path)
        return "file" if target.is_file() else "not a regular file" if target.exists() else \
            "no such file"
    except OSError as e:  # a name too long, a loop of links
        return f"cannot be looked up ({e.strerror})"
