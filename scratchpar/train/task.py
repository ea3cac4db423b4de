"""A task ties a dataset to a model and its loss: what the training loop trains and evaluates."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import nn
from ..autograd import functional as F
from ..autograd import no_grad
from ..backend import rng, to_device
from ..data import (
    Characters,
    CharText,
    LowRankRatings,
    SparseLogistic,
    SyntheticClassification,
    SyntheticLanguage,
)
from ..data.shard import Part
from ..device_rng import DeviceRandom
from ..optim.scaler import LossScaler, scaled
from ..parallel.objective import takes_reduction
from .divergence import finite_or_text

HALF_SQUARED = "½·squared error"  # a regression's measure, read as an RMSE in the summary


@dataclass
class Task:
    """A language-modelling task (``unit`` "tok": batches B (b, n+1) of ids) or a per-sample
    one (``unit`` "sample": a tuple of arrays, the model's inputs then the targets (b,), scored
    by ``criterion(output, targets, reduction)``, a loss in ``measure`` per sample)."""

    dataset: object
    model: nn.Module
    unit: str  # what the loss is averaged over: "tok" or "sample"
    criterion: Callable = F.cross_entropy  # a sample task's loss of (output, targets)
    measure: str = "nats"  # what the loss counts: nats, or a regression's squared error
    scaler: LossScaler | None = None  # fp16's loss scale, which every loss's backward carries

    def __post_init__(self):
        if self.unit == "sample":  # every strategy asks the loss for a sum
            takes_reduction(self.criterion, f"the task's criterion "
                                            f"{getattr(self.criterion, '__name__', '')!r}")

    def batch(self, step: int, batch_size: int, rows=None):
        """Global batch ``step`` on the device: B (b, n+1) ids, or (x (b, F), y (b,)), or
        (idx (b, nnz), val (b, nnz), y (b,)), or (user (b,), item (b,), rating (b,)), and its
        units, counted on the host before the copy (counting on the device would be a sync).
        With ``rows = (start, stop)``, those rows alone, as a :class:`Part`, and ``None``
        units: the others' are not drawn."""
        return self._placed(self.dataset.batch(step, batch_size, rows), rows, batch_size)

    def held_out_batch(self, i: int, batch_size: int):
        """Held-out batch ``i`` on the device, and its units: a batch no training step reads
        (the source's ``held_out``: a text's held-out part, another source's fresh draw)."""
        return self._placed(self.dataset.held_out(i, batch_size), None, batch_size)

    def _placed(self, batch, rows, batch_size: int):
        """A batch drawn on the host, moved to the device with its units (see :meth:`batch`)."""
        units = None if rows is not None else int(self.count(batch))  # on the host: no wait
        batch = tuple(map(to_device, batch)) if isinstance(batch, tuple) else to_device(batch)
        return (batch if rows is None else Part(batch, *rows, batch_size)), units

    def loss(self, model, batch, reduction: str = "mean"):
        """``batch``'s loss under ``model``. A sparse model's auxiliary losses are not in the
        value: its layers carry them into backward as terms of the summed loss
        (:class:`~scratchpar.nn.moe.MixtureOfExperts`), so its loss is summed."""
        if self.unit == "tok":
            if reduction != "sum" and any(isinstance(m, nn.MixtureOfExperts)
                                          for _, m in model.named_modules()):
                raise ValueError("a sparse model's auxiliary losses join the summed loss's "
                                 "backward: ask for reduction='sum' and divide by count()")
            return scaled(nn.lm_loss(model, batch, reduction), self.scaler)
        *inputs, targets = batch
        return scaled(self.criterion(model(*inputs), targets, reduction=reduction), self.scaler)

    def split(self, batch):
        """(inputs, targets): what the model reads and what its output is scored against
        (a pipeline's first stage takes the one, its last stage the other): a pipelined sample
        task's batch is (x, y)."""
        return nn.shift(batch) if self.unit == "tok" else batch

    def output_loss(self, out, targets, reduction: str = "mean"):
        """The loss of the model's output ``out`` against ``targets`` (from :meth:`split`)."""
        loss = (nn.lm_output_loss(out, targets, reduction) if self.unit == "tok"
                else self.criterion(out, targets, reduction=reduction))
        return scaled(loss, self.scaler)

    def count(self, batch):
        """Units (non-pad target tokens, or samples) in ``batch``: an int, or a 0-d array on
        the batch's device."""
        return nn.count_targets(batch) if self.unit == "tok" else len(batch[-1])

    def floor(self) -> float | None:
        """The best achievable loss per unit, where the data source knows it."""
        return self.dataset.bayes_risk()

    def evaluate(self, n_batches: int, batch_size: int) -> float:
        """Held-out loss per unit: Σ losses / Σ units over ``n_batches`` held-out batches."""
        return self.held_out(n_batches, batch_size)[0]

    def held_out(self, n_batches: int, batch_size: int, rows: int | None = None,
                 score=None) -> tuple[float, float | None]:
        """In one pass over ``n_batches`` held-out batches: the loss per unit, and the share of
        samples a classifier labels right, None for a task that is not a classification. On
        this model, each batch ``rows`` rows at a time (a training rank's share), so that
        evaluating needs no more memory than a step; or by ``score(batch, task)``, a
        strategy's collective that scores the global batch in its training layout and
        returns ``(Σ losses, Σ right)`` on every rank (``Strategy.scores_in_layout``)."""
        total = units = right = 0.0
        for whole, n in self._held_out(n_batches, batch_size):
            if score is not None:
                loss, hits = score(whole, self)
                total, right = total + loss, right + hits
            else:
                for batch in _pieces(whole, rows or batch_size):
                    loss, hits = self.score(self.model, batch)
                    total, right = total + float(loss), right + int(hits)
            units += n
        labels = self.labels()
        return total / max(units, 1), (right / max(units, 1) if labels else None)

    def labels(self) -> bool:
        """Whether the task labels samples (a classification), so that its accuracy counts."""
        binary = self.criterion is F.binary_cross_entropy_with_logits
        return self.unit == "sample" and (binary or self.criterion is F.cross_entropy)

    def score(self, model, batch) -> tuple:
        """``batch``'s summed loss under ``model`` and how many samples it labels right (0 for
        a task that is not a classification), on the device."""
        if not self.labels():  # a language model's tokens alone, not its routing's aux loss
            loss = (nn.lm_loss(model, batch, "sum") if self.unit == "tok"
                    else self.loss(model, batch, reduction="sum"))
            return loss.data, 0
        *inputs, targets = batch
        out = model(*inputs)  # (b, K) logits, or (b,) for a binary one
        return self.criterion(out, targets, reduction="sum").data, self.right(out, targets)

    def right(self, out, targets):
        """How many of a classifier's outputs ``out`` label their ``targets`` right: the
        largest logit, or a logit above 0 for a binary one (0 for another task)."""
        if not self.labels():
            return 0
        binary = self.criterion is F.binary_cross_entropy_with_logits
        said = out.data > 0 if binary else out.data.argmax(axis=-1)  # (b,)
        return (said == (targets > 0.5 if binary else targets)).sum()

    def scores(self, n_batches: int, batch_size: int, rows: int | None = None,
               score=None) -> dict:
        """The held-out figures a run ends on and ``evaluate`` prints: the loss (its text
        where it is not finite), in bits per character for text, a classifier's accuracy,
        and the floor and the gap to it where the data knows its floor; ``rows`` and
        ``score`` as for :meth:`held_out`."""
        loss, accuracy = self.held_out(n_batches, batch_size, rows, score)
        floor = self.floor()
        return {"loss": finite_or_text(loss),
                "bits_per_char": self.bits_per_char(loss) if math.isfinite(loss) else None,
                "accuracy": accuracy, "floor": floor,
                "gap": None if floor is None else finite_or_text(loss - floor)}

    def bits_per_char(self, loss: float) -> float | None:
        """``loss`` (nats per token) in bits per character, the unit of character-level
        language modelling, where a token is a character (text data); else None."""
        return loss / math.log(2) if isinstance(self.dataset, Characters) else None

    @property
    def vocabulary(self) -> str | None:
        """A text's characters, id i + 1 for character i, which a checkpoint keeps so that its
        model reads and writes text without the file it was trained on; None for other data."""
        return self.dataset.chars if isinstance(self.dataset, Characters) else None

    def _held_out(self, n_batches: int, batch_size: int):
        """The held-out batches and their units, the model in evaluation mode, no graph."""
        self.model.eval()
        with no_grad():
            for i in range(n_batches):
                yield self.held_out_batch(i, batch_size)
        self.model.train()


def eval_rows(cfg, world_size: int) -> int:
    """The rows rank 0 scores at a time in the run's held-out evaluation: a rank's share of
    the batch, so that evaluating a whole batch on one rank needs no more than a step."""
    return -(-cfg.train.batch_size // world_size)


def _pieces(batch, rows: int):
    """``batch`` (an array, or a tuple of arrays with one row per sample) ``rows`` rows at a
    time."""
    n = len(batch[-1]) if isinstance(batch, tuple) else len(batch)
    for start in range(0, n, rows):
        yield (tuple(a[start:start + rows] for a in batch) if isinstance(batch, tuple)
               else batch[start:start + rows])


def build_task(cfg, dropout_gen: DeviceRandom, chars: str | None = None,
               text: bool = True) -> Task:
    """Dataset and freshly initialized model for Config ``cfg`` (initialization seeded by it);
    ``chars``: a text's vocabulary, where it must be a trained model's; without ``text``, that
    vocabulary alone stands for the file (a model that only writes text needs no more)."""
    m, d = cfg.model, cfg.data
    seed, dtype = cfg.train.seed, np.dtype(cfg.train.dtype)
    if d.source == "classification":
        data = SyntheticClassification(d.n_features, d.n_classes, seed=seed)
        model = nn.MLP([d.n_features, *m.hidden_sizes, d.n_classes], rng(seed, 0), dtype)
        return Task(data, model, "sample")
    if d.source == "sparse-logreg":
        data = SparseLogistic(d.n_features, d.nnz, seed=seed)
        model = nn.SparseLogisticRegression(d.n_features, rng(seed, 0), dtype)
        return Task(data, model, "sample", F.binary_cross_entropy_with_logits)
    if d.source == "matrix-factorization":
        data = LowRankRatings(d.n_users, d.n_items, d.rank, d.noise, seed=seed)
        model = nn.MatrixFactorization(d.n_users, d.n_items, d.rank, rng(seed, 0), dtype)
        return Task(data, model, "sample", nn.half_squared_error, HALF_SQUARED)
    if d.source == "text":
        data = CharText(d.path, d.seq_len, seed, chars, d.eval_fraction) \
            if text or chars is None else Characters(chars)
    else:
        data = SyntheticLanguage(d.vocab_size, d.order, d.seq_len, d.concentration,
                                 d.mean_length, seed=seed)
    init = rng(seed, 0)
    if m.kind == "gpt":
        experts = (nn.Experts(m.experts, m.top_k, m.capacity_factor, m.balance_loss,
                              m.z_loss) if m.experts else None)
        model = nn.GPT(data.vocab_size, d.seq_len, m.d_model, m.n_heads, m.n_layers, init,
                       dropout=m.dropout, dtype=dtype, tie_embeddings=m.tie_embeddings,
                       experts=experts, moe_every=m.moe_every, kv_heads=m.groups, d_ff=m.wide)
        nn.set_dropout_generator(model, dropout_gen)
    else:
        cls = nn.LSTMLanguageModel if m.kind == "lstm" else nn.RNNLanguageModel
        model = cls(data.vocab_size, m.d_model, m.d_hidden, init, dtype, n_layers=m.n_layers)
    return Task(data, model, "tok")
