"""Run configuration: frozen dataclasses, one per section, filled from defaults < a TOML file <
command-line flags (``cli.py``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .defaults import ADAM_LR, MAX_DEFAULT_WARMUP, SGD_LR, SGD_LR_ANY
from .option import ConfigError, opt
from .strategies import (
    REGISTRY,
    BucketFlags,
    ElasticFlags,
    HogwildFlags,
    MeshFlags,
    ServerFlags,
    ZeroFlags,
)

__all__ = ["Config", "ConfigError", "DataConfig", "ModelConfig", "OptimConfig", "RunConfig",
           "SECTIONS", "TrainConfig"]


@dataclass(frozen=True)
class ModelConfig:
    kind: str = opt("gpt", "model to train (default: gpt, or the model a source brings: mlp "
                           "for classification, logreg for sparse-logreg, factors for "
                           "matrix-factorization)",
                    flag="--model", choices=("gpt", "lstm", "rnn", "mlp", "logreg", "factors"))
    d_model: int = opt(64, "embedding / model width (gpt, lstm, rnn)")
    n_heads: int = opt(4, "attention heads (gpt)")
    kv_heads: int = opt(0, "gpt: key/value heads, each shared by n_heads/kv_heads query heads "
                           "(grouped-query attention, Ainslie et al. 2023; 0: one per head)")
    d_ff: int = opt(0, "gpt: each block's feed-forward width (0: 4·d_model)")
    n_layers: int = opt(2, "transformer blocks (gpt) or stacked recurrent layers (lstm, rnn)")
    d_hidden: int = opt(128, "recurrent state size (lstm, rnn)")
    hidden_sizes: tuple = opt((512, 512), "hidden layer sizes, comma-separated (mlp)")
    dropout: float = opt(0.0, "dropout probability (gpt)")
    tie_embeddings: bool = opt(False, "gpt: the head reuses the token embedding's matrix "
                                      "(Press & Wolf 2017)")
    experts: int = opt(0, "gpt: experts in each sparse block's MLP, each token routed to "
                          "--top-k of them (0: dense; Switch Transformer, Fedus et al. 2021)")
    top_k: int = opt(2, "--experts: the experts each token is routed to")
    moe_every: int = opt(1, "--experts: every n-th block is sparse")
    capacity_factor: float = opt(1.0, "--experts: each expert takes ⌈k·T·c/E⌉ assignments of "
                                      "a batch's T tokens, the rest dropped to the residual "
                                      "(0: dropless)")
    balance_loss: float = opt(0.01, "--experts: α of the load-balancing loss α·E·Σ fᵢ·Pᵢ "
                                    "(Fedus et al. 2021, eq. 4)")
    z_loss: float = opt(0.001, "--experts: β of the router z-loss β·mean(logsumexp)² "
                               "(Zoph et al. 2022, eq. 5)")

    @property
    def groups(self) -> int:
        """G, the GPT's key/value heads."""
        return self.kv_heads or self.n_heads

    @property
    def per_group(self) -> int:
        """r = H/G, the query heads that share each key/value head."""
        return self.n_heads // self.groups

    @property
    def key_width(self) -> int:
        """K = G·d, the width of the GPT's keys (and of its values): C with a key/value head
        per query head."""
        return self.groups * (self.d_model // self.n_heads)

    @property
    def wide(self) -> int:
        """The GPT's feed-forward width."""
        return self.d_ff or 4 * self.d_model


@dataclass(frozen=True)
class DataConfig:
    source: str = opt("synthetic", "data source; --data PATH implies text",
                      choices=("synthetic", "text", "classification", "sparse-logreg",
                               "matrix-factorization"))
    path: str | None = opt(None, "character-level text file to train on", flag="--data", kind=str)
    eval_fraction: float = opt(0.1, "text: the last fraction of the file, held out for "
                                    "evaluation and never trained on")
    seq_len: int = opt(64, "tokens per sequence (language models)")
    vocab_size: int = opt(32, "synthetic language: vocabulary size, incl. PAD/BOS/EOS")
    order: int = opt(2, "synthetic language: Markov order of the source")
    mean_length: float = opt(20.0, "synthetic language: mean sentence length in words")
    concentration: float = opt(0.1, "synthetic language: Dirichlet concentration (low = peaked)")
    n_features: int = opt(784, "classification, sparse-logreg: input features")
    n_classes: int = opt(10, "classification: classes")
    nnz: int = opt(8, "sparse-logreg: non-zero features per sample, at most half of them")
    n_users: int = opt(200, "matrix-factorization: rows (users) of the ratings matrix")
    n_items: int = opt(200, "matrix-factorization: columns (items) of the ratings matrix")
    rank: int = opt(4, "matrix-factorization: rank of the true ratings matrix and of the "
                       "model's factors")
    noise: float = opt(0.1, "matrix-factorization: standard deviation σ of each rating's "
                            "Gaussian noise; the loss floor is σ²/2")


@dataclass(frozen=True)
class OptimConfig:
    optimizer: str | None = opt(None, "optimizer (default: adamw; sgd for --strategy hogwild "
                                      "and the sparse sources, as in their papers, and for "
                                      "--strategy easgd given --momentum: EAMSGD)",
                                choices=("sgd", "adam", "adamw"), kind=str)
    lr: float | None = opt(None, f"peak learning rate (default: {ADAM_LR:g} for adam and "
                                 "adamw; for sgd " + ", ".join(f"{v:g} for {k}" for k, v in
                                                               SGD_LR.items()) +
                                 f", {SGD_LR_ANY:g} for the others, times 1 − momentum)",
                         kind=float)
    momentum: float | None = opt(None, "SGD momentum (default: 0.9; 0 where sgd is the default;"
                                       " with --strategy easgd it is Nesterov's: EAMSGD)",
                                 kind=float)
    weight_decay: float = opt(0.0, "weight decay (L2 for sgd/adam, decoupled for adamw)")
    grad_clip: float = opt(1.0, "clip gradients to this global norm (0 = off)")
    schedule: str = opt("cosine", "LR schedule after warm-up",
                        choices=("constant", "cosine", "linear"))
    warmup: int | None = opt(None, "linear warm-up steps (default: a tenth of --steps, at most "
                                   f"{MAX_DEFAULT_WARMUP})", kind=int)
    min_lr: float = opt(0.0, "final learning rate of the decay")


@dataclass(frozen=True)
class RunConfig:
    """What the training loop itself reads: the strategy's name, the run's length, batch,
    seed, device, dtype, precision and recomputation, its logging, checkpoints and trace."""

    strategy: str = opt("dp", "parallel strategy: " + "; ".join(
        f"{name}, {family.names[name]}" for name, family in REGISTRY.items()),
                        choices=tuple(REGISTRY))
    steps: int = opt(1500, "optimizer steps to train")
    batch_size: int = opt(32, "global batch size (sequences or samples)")
    seed: int = opt(0, "seed of the data, the initialization and dropout")
    device: str = opt("cpu", "array backend (double: CuPy's rules on the CPU, for testing)",
                      choices=("cpu", "cuda", "double"))
    dtype: str = opt("float32", "parameter and activation dtype", choices=("float32", "float64"))
    precision: str = opt("fp32", "compute precision: fp16 or bf16 run forward and backward in "
                                 "16 bits, with fp32 master weights and optimizer state; fp16 "
                                 "with a dynamic loss scale (Micikevicius et al. 2018)",
                         choices=("fp32", "fp16", "bf16"))
    recompute: str = opt("none", "activation recomputation: full keeps only each layer's input "
                                 "(all but the last) and runs its forward again in backward "
                                 "(Chen et al. 2016); selective, only the GPT's attention core, "
                                 "its T × T arrays (Korthikanti et al. 2022)",
                         choices=("none", "full", "selective"))
    log_every: int = opt(25, "steps between metrics records")
    eval_batches: int = opt(8, "held-out batches for the final evaluation")
    metrics: str = opt("runs/metrics.jsonl", "JSONL metrics file")
    save: str | None = opt(None, "checkpoint directory to write", kind=str)
    save_every: int = opt(0, "steps between checkpoints (0 = only at the end)")
    resume: str | None = opt(None, "checkpoint directory to resume from", kind=str)
    stop_after: int | None = opt(None, "stop after this step, as if interrupted (schedule "
                                       "unchanged)", kind=int)
    target_loss: float | None = opt(
        None, "stop at the first metrics record whose training loss (the mean over its "
              "--log-every steps) is at most this; the final record says the step it was "
              "reached at (single, dp, dp-naive, zero: every rank reads the same loss)",
        kind=float)
    max_bad_steps: int = opt(5, "stop (exit 3) after this many steps in a row whose loss or "
                                "gradient is not finite; each is skipped")
    progress: bool = opt(True, "show a progress bar")
    trace: str | None = opt(None, "every rank records its compute and communication regions; "
                                  "rank 0 writes them to this Chrome trace JSON (Perfetto)",
                            kind=str)


@dataclass(frozen=True)
class TrainConfig(ZeroFlags, ElasticFlags, HogwildFlags, ServerFlags, MeshFlags, BucketFlags,
                  RunConfig):
    """The ``[train]`` section: the loop's own fields (:class:`RunConfig`), then each family of
    strategies' flags, declared beside its builder in ``train/strategies/`` with the strategies
    it goes with (a field's ``owners``). Dataclasses collect the fields of their bases in
    reverse order, so ``--help`` lists them run first, then dp, mesh, ps, hogwild, easgd and
    ZeRO."""


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


SECTIONS = {"model": ModelConfig, "data": DataConfig, "optim": OptimConfig, "train": TrainConfig}
