"""Run configuration: frozen dataclasses filled from defaults < a TOML file < command-line flags."""

from __future__ import annotations

import argparse
import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .defaults import ADAM_LR, MAX_DEFAULT_WARMUP, SGD_LR, SGD_LR_ANY, fill_defaults

MIB = 2**20
MAX_CONFIG_BYTES = 1 << 20  # a --config file larger than this is not a run configuration


class ConfigError(ValueError):
    """An invalid configuration; the message lists every violation found, one per line."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


def opt(default, help: str, flag: str | None = None, choices: tuple | None = None,
        kind: type | None = None):
    """A config field with its help, flag (``--field-name``), choices and type (of the default)."""
    return field(default=default, metadata={"help": help, "flag": flag, "choices": choices,
                                            "kind": kind or type(default)})


@dataclass(frozen=True)
class ModelConfig:
    kind: str = opt("gpt", "model to train (default: gpt, or the model a source brings: mlp "
                           "for classification, logreg for sparse-logreg, factors for "
                           "matrix-factorization)",
                    flag="--model", choices=("gpt", "lstm", "rnn", "mlp", "logreg", "factors"))
    d_model: int = opt(64, "embedding / model width (gpt, lstm, rnn)")
    n_heads: int = opt(4, "attention heads (gpt)")
    n_layers: int = opt(2, "transformer blocks (gpt) or stacked recurrent layers (lstm, rnn)")
    d_hidden: int = opt(128, "recurrent state size (lstm, rnn)")
    hidden_sizes: tuple = opt((512, 512), "hidden layer sizes, comma-separated (mlp)")
    dropout: float = opt(0.0, "dropout probability (gpt)")
    tie_embeddings: bool = opt(False, "gpt: the head reuses the token embedding's matrix "
                                      "(Press & Wolf 2017)")


@dataclass(frozen=True)
class DataConfig:
    source: str = opt("synthetic", "data source; --data PATH implies text",
                      choices=("synthetic", "text", "classification", "sparse-logreg",
                               "matrix-factorization"))
    path: str | None = opt(None, "character-level text file to train on", flag="--data", kind=str)
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
class TrainConfig:
    strategy: str = opt("dp", "parallel strategy: one device, data parallel (bucketed, "
                        "overlapped), data parallel with one all-reduce per parameter, "
                        "local SGD (periodic model averaging), pipeline parallel (with "
                        "data-parallel replicas of the pipeline), the hybrid dp × pp × tp "
                        "mesh (tensor-parallel stages), parameter servers, Hogwild (lock-free "
                        "SGD on shared parameters), elastic averaging (EASGD) or ZeRO (data "
                        "parallel with the model states sharded over the ranks: --zero-stage)",
                        choices=("single", "dp", "dp-naive", "local-sgd", "pipeline", "hybrid",
                                 "ps", "hogwild", "easgd", "zero"))
    bucket_mb: float = opt(1.0, "dp, local-sgd, zero: bucket size in MiB (gradients reduced; "
                                "models averaged)")
    local_sgd_every: int = opt(8, "local-sgd: average the models every this many steps "
                                  "(0 = once, at the end)")
    local_sgd_warmup: int = opt(0, "local-sgd: synchronous (dp) steps before local ones")
    zero_stage: int = opt(1, "zero: what each of the N ranks keeps 1/N of (ZeRO, Rajbhandari "
                             "et al. 2020): 1 the optimizer state, 2 the gradients too, 3 the "
                             "parameters too, gathered layer by layer when used",
                          choices=(1, 2, 3))
    offload: str = opt("none", "zero: cpu keeps each rank's optimizer state and a master copy of "
                               "its shard of the parameters in host memory, and updates them "
                               "there (ZeRO-Offload, Ren et al. 2021)", choices=("none", "cpu"))
    servers: int = opt(1, "ps: server ranks 0 … S−1, each owning a key range of the "
                          "parameters; the other ranks are workers")
    ps_mode: str = opt("sync", "ps: synchronous (every worker's push, one update, every worker "
                               "pulls), locked (one worker at a time reads, updates and writes), "
                               "async (Downpour: each push applied as it arrives) or ssp "
                               "(bounded staleness)", choices=("sync", "locked", "async", "ssp"))
    staleness: int = opt(2, "ps ssp: τ, how many clocks a worker may run ahead of the slowest "
                            "(0 = synchronous; --ps-mode async: nobody waits)")
    warmup_sync: int = opt(0, "ps async: synchronous steps before the asynchronous ones "
                              "(DistBelief's warm start)")
    n_push: int = opt(1, "ps async: a worker pushes its summed gradient every this many steps")
    n_fetch: int = opt(1, "ps async: a worker pulls the parameters every this many steps")
    lock: bool = opt(False, "hogwild: one writer at a time under the window's exclusive lock "
                            "(the spec beside lock-free Hogwild)")
    window: str = opt("auto", "hogwild: where the parameters live: a node's shared memory, "
                              "rank 0's one-sided window (across nodes), or auto (shared when "
                              "every rank is on one node)", choices=("auto", "shared",
                                                                     "one-sided"))
    easgd_mode: str = opt("sync", "easgd: synchronous (the elastic differences all-reduced "
                                  "every --tau steps), async (the centre on master rank 0, each "
                                  "worker exchanging every --tau of its own steps) or "
                                  "round-robin (seed 001's Algorithm 1: a CPU master serves one "
                                  "worker per step)", choices=("sync", "async", "round-robin"))
    rho: float | None = opt(None, "easgd: ρ, the elastic force, α = ηρ (default: the paper's "
                                  "β = pα = 0.9 at the peak rate η, ρ = 0.9/(p·η) for p "
                                  "workers)", kind=float)
    tau: int = opt(4, "easgd sync, async: steps between exchanges with the centre (τ)")
    pp: int = opt(1, "pipeline, hybrid: stages", flag="--pp")
    tp: int = opt(1, "hybrid: tensor-parallel ranks per stage (Megatron)", flag="--tp")
    dp: int | None = opt(None, "pipeline, hybrid: replicas of the pipeline (default: the world "
                               "size over --pp × --tp)", flag="--dp", kind=int)
    sequence_parallel: bool = opt(False, "hybrid, gpt: LayerNorm and dropout on sequence "
                                         "shards, all-gather and reduce-scatter in place of "
                                         "the all-reduces (Korthikanti et al. 2022)")
    pp_schedule: str = opt("1f1b", "pipeline: naive model distribution (one micro-batch), "
                           "GPipe, 1F1B (PipeDream-Flush), interleaved 1F1B, backward-"
                           "prioritized, or PipeDream (asynchronous, weights stashed)",
                           choices=("naive", "gpipe", "1f1b", "interleaved", "bprio",
                                    "pipedream"))
    microbatches: int | None = opt(None, "pipeline: micro-batches per replica's batch "
                                         "(default: 1 for naive, else twice --pp)", kind=int)
    virtual: int = opt(1, "pipeline, interleaved: model chunks per rank")
    balance: str = opt("params", "pipeline: balance the stages by parameter count or by "
                                 "measured time", choices=("params", "time"))
    steps: int = opt(1500, "optimizer steps to train")
    batch_size: int = opt(32, "global batch size (sequences or samples)")
    seed: int = opt(0, "seed of the data, the initialization and dropout")
    device: str = opt("cpu", "array backend (double: CuPy's rules on the CPU, for testing)",
                      choices=("cpu", "cuda", "double"))
    dtype: str = opt("float32", "parameter and activation dtype", choices=("float32", "float64"))
    log_every: int = opt(25, "steps between metrics records")
    eval_batches: int = opt(8, "held-out batches for the final evaluation")
    metrics: str = opt("runs/metrics.jsonl", "JSONL metrics file")
    save: str | None = opt(None, "checkpoint directory to write", kind=str)
    save_every: int = opt(0, "steps between checkpoints (0 = only at the end)")
    resume: str | None = opt(None, "checkpoint directory to resume from", kind=str)
    stop_after: int | None = opt(None, "stop after this step, as if interrupted (schedule "
                                       "unchanged)", kind=int)
    max_bad_steps: int = opt(5, "stop (exit 3) after this many steps in a row whose loss or "
                                "gradient is not finite; each is skipped")
    progress: bool = opt(True, "show a progress bar")
    trace: str | None = opt(None, "every rank records its compute and communication regions; "
                                  "rank 0 writes them to this Chrome trace JSON (Perfetto)",
                            kind=str)

    @property
    def m(self) -> int:
        """Micro-batches per replica's batch (``--microbatches`` or its default)."""
        if self.microbatches is not None:
            return self.microbatches
        return 1 if self.pp_schedule == "naive" else 2 * self.pp

    def replicas(self, world_size: int) -> int:
        """Pipeline replicas on ``world_size`` ranks: ``--dp``, or the world over ``--pp``
        × ``--tp``."""
        return self.dp if self.dp is not None else world_size // (self.pp * self.tp)

    @property
    def bucket_bytes(self) -> int:
        """``bucket_mb`` in bytes, as the strategies take it (for a finite bucket_mb)."""
        return round(self.bucket_mb * MIB)


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


SECTIONS = {"model": ModelConfig, "data": DataConfig, "optim": OptimConfig, "train": TrainConfig}


def _flag(f: dataclasses.Field) -> str:
    return f.metadata["flag"] or "--" + f.name.replace("_", "-")


class _Parser(argparse.ArgumentParser):
    """argparse that raises ConfigError instead of printing its usage and exiting, so that a
    bad flag is reported like every other invalid value (once per job, not once per rank)."""

    def error(self, message: str):
        raise ConfigError([f"{message} (python -m scratchpar.train --help lists the flags)"])


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m scratchpar.train",
        description="Train a model with scratchpar. Values come from defaults, then --config "
                    "TOML ([model], [data], [optim], [train] tables), then these flags.",
        argument_default=argparse.SUPPRESS)
    parser.add_argument("--config", help="TOML file with [model] [data] [optim] [train] tables")
    for section, cls in SECTIONS.items():
        group = parser.add_argument_group(section)
        for f in dataclasses.fields(cls):
            shown = "" if "(default:" in f.metadata["help"] else f" (default: {_show(f.default)})"
            kw = {"dest": f"{section}.{f.name}", "help": f.metadata["help"] + shown}
            if isinstance(f.default, bool):
                kw["action"] = argparse.BooleanOptionalAction
            elif isinstance(f.default, tuple):
                kw["type"], kw["metavar"] = _int_tuple, "N,N,…"
            else:
                kw["type"] = f.metadata["kind"]
                kw["choices"] = f.metadata["choices"]
                kw["metavar"] = None if kw["choices"] else f.name.upper()
            group.add_argument(_flag(f), **kw)
    return parser


def _show(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _int_tuple(text: str) -> tuple:
    try:
        return tuple(int(v) for v in text.split(",")) if text.strip() else ()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}")\
            from None


def load_config(argv: list[str] | None = None, world_size: int = 1) -> Config:
    """Parse flags (and the TOML file they name) into a Config validated for ``world_size``
    ranks, or raise ConfigError."""
    args = vars(build_parser().parse_args(argv))
    values: dict[str, dict] = {s: {} for s in SECTIONS}
    problems: list[str] = []
    if "config" in args:
        _read_toml(Path(args.pop("config")), values, problems)
    for key, value in args.items():
        section, name = key.split(".")
        values[section][name] = value
    if values["data"].get("path") and "source" not in values["data"]:
        values["data"]["source"] = "text"
    if problems:
        raise ConfigError(problems)
    return make_config(values, world_size)


def _read_toml(path: Path, values: dict, problems: list[str]) -> None:
    try:
        if not path.is_file():
            raise ValueError("no such file" if not path.exists() else "not a regular file")
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ValueError(f"{path.stat().st_size:,} bytes; a configuration is a short TOML "
                             "file")
        table = tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        problems.append(f"--config {path}: not UTF-8 text ({e.reason} at byte {e.start})")
        return
    except (OSError, ValueError) as e:  # TOMLDecodeError is a ValueError
        problems.append(f"--config {path}: {e}")
        return
    for section, entries in table.items():
        if section not in SECTIONS or not isinstance(entries, dict):
            problems.append(f"--config {path}: unknown table [{section}]")
            continue
        known = {f.name: f for f in dataclasses.fields(SECTIONS[section])}
        for name, value in entries.items():
            if name not in known:
                problems.append(f"--config {path}: unknown key {section}.{name}")
            else:
                values[section][name] = tuple(value) if isinstance(value, list) else value


def make_config(values: dict[str, dict], world_size: int = 1) -> Config:
    """Build a Config from per-section overrides and validate it for ``world_size`` ranks
    (raises ConfigError)."""
    from .validate import validate

    values = {s: dict(values.get(s, {})) for s in SECTIONS}
    problems = _type_problems(values)
    if problems:
        raise ConfigError(problems)
    fill_defaults(values, TrainConfig.steps)
    config = Config(**{s: cls(**values[s]) for s, cls in SECTIONS.items()})
    problems = validate(config, world_size)
    if problems:
        raise ConfigError(problems)
    return config


def _type_problems(values: dict[str, dict]) -> list[str]:
    problems = []
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            if f.name not in values.get(section, {}):
                continue
            value, kind = values[section][f.name], f.metadata["kind"]
            expected = (int, float) if kind is float else kind
            if value is None and f.default is None:
                continue
            wrong = not isinstance(value, expected) or isinstance(value, bool) and kind is not bool
            if wrong or kind is tuple and not all(
                    isinstance(v, int) and not isinstance(v, bool) for v in value):
                what = "a list of integers" if kind is tuple else kind.__name__
                problems.append(f"{section}.{f.name}: expected {what}, got {value!r}")
            elif kind is float:
                values[section][f.name] = float(value)
    return problems
