"""Seeded fuzz cases: case i of seed s is always the same run of ``python -m scratchpar.train``,
at 1–4 ranks or without mpiexec, from a tiny config with a few flags mutated, or resuming a
prepared checkpoint under another config or world size, or a corrupted copy of one."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from fuzz_files import BASE_WEIGHTS, BASES, CORRUPTIONS, PREPARED
from fuzz_flags import FLAGS, NOISE, is_switch, parser_flags

RANKS = (0, 1, 1, 2, 2, 2, 3, 4)  # 0: a plain ``python -m scratchpar.train``, no mpiexec
KINDS, KIND_WEIGHTS = ("valid", "boundary", "hostile"), (4, 3, 3)
SCENARIOS, SCENARIO_WEIGHTS = ("mutate", "files", "resume", "corrupt"), (4, 2, 2, 2)
MUTATIONS = {"mutate": (1, 1, 2, 2, 3), "files": (0, 0, 1), "resume": (0, 0, 1, 2),
             "corrupt": (0, 0, 1, 2)}  # how many flags a case mutates besides its scenario's
FILE_FLAGS = ("--config", "--data", "--metrics", "--save", "--trace", "--resume")
CHECKPOINT = "{tmp}/ck-in"  # where a case's copy of a prepared checkpoint lies


@dataclass(frozen=True)
class Case:
    seed: int
    index: int
    scenario: str
    ranks: int
    args: tuple[str, ...]  # after ``-m scratchpar.train``; {tmp} stands for the case's folder
    changes: tuple[str, ...]  # what differs from the base config, for the id
    salt: int  # seeds the case's files and corruption
    checkpoint: str | None = None  # a PREPARED name, copied to CHECKPOINT
    corruption: str | None = None  # a CORRUPTIONS name, applied to that copy

    @property
    def id(self) -> str:
        what = [self.checkpoint, self.corruption, *self.changes]
        text = re.sub(r"[^\w=.,+-]", "_", ",".join(w for w in what if w), flags=re.ASCII)
        return f"{self.index:03d}-n{self.ranks}-{self.scenario}-{text}"


def make_case(seed: int, index: int) -> Case:
    rnd = random.Random(f"scratchpar-fuzz:{seed}:{index}")
    scenario = rnd.choices(SCENARIOS, SCENARIO_WEIGHTS)[0]
    ranks = rnd.choice(RANKS)
    checkpoint = rnd.choice(sorted(PREPARED)) if scenario in ("resume", "corrupt") else None
    corruption = rnd.choice(sorted(CORRUPTIONS)) if scenario == "corrupt" else None
    start, flags, label = _scenario(rnd, scenario, checkpoint)
    fixed = {k for k, v in flags.items() if start.get(k) != v}  # what the scenario is about
    names = sorted(f for f in parser_flags() if f in FLAGS and f not in fixed)
    flags.update(_mutate(rnd, rnd.sample(names, rnd.choice(MUTATIONS[scenario])), KINDS))
    changes = (*label, *(_show(v) for k, v in flags.items()
                         if start.get(k) != v and v != ("--resume", CHECKPOINT)))
    flags.setdefault("--metrics", ("--metrics", "{tmp}/metrics.jsonl"))
    if rnd.random() < 0.1:
        flags[""] = rnd.choice(NOISE)
        changes += (_show(flags[""]),)
    args = tuple(token for tokens in flags.values() for token in tokens)
    return Case(seed, index, scenario, ranks, args, changes, rnd.getrandbits(32), checkpoint,
                corruption)


def _scenario(rnd: random.Random, scenario: str, checkpoint: str | None):
    """The base flags, the scenario's flags on top of them, and a label for the id."""
    if checkpoint is None:
        base = rnd.choices(list(BASES), BASE_WEIGHTS)[0]
        start = _tokens(BASES[base])
        flags = dict(start)
        if scenario == "files":
            flags.update(_mutate(rnd, [rnd.choice(FILE_FLAGS)], ("boundary", "hostile")))
        return start, flags, () if base == "gpt" else (base,)
    config = checkpoint if scenario == "corrupt" or rnd.random() < 0.6 else \
        rnd.choice(sorted(PREPARED))  # resume under another prepared run's config
    start = _tokens(PREPARED[config][1])
    flags = {**start, "--resume": ("--resume", CHECKPOINT)}
    if rnd.random() < 0.3:
        flags["--save"] = ("--save", rnd.choice([CHECKPOINT, "{tmp}/ck-out"]))
    if rnd.random() < 0.3:
        flags["--strategy"] = ("--strategy", rnd.choice(FLAGS["--strategy"].valid))
    return start, flags, () if config == checkpoint else (f"as {config}",)


def cases(seed: int, n: int) -> list[Case]:
    return [make_case(seed, i) for i in range(n)]


def _tokens(argv: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """``--flag value`` pairs and lone switches of ``argv``, keyed by flag."""
    flags, switches = {}, {f: a for f, a in parser_flags().items() if is_switch(a)}
    i = 0
    while i < len(argv):
        name = next((f for f, a in switches.items() if argv[i] in a.option_strings), None)
        if name:
            flags[name], i = (argv[i],), i + 1
        else:
            flags[argv[i]], i = (argv[i], argv[i + 1]), i + 2
    return flags


def _show(tokens: tuple[str, ...]) -> str:
    """``lr=inf``, ``no-progress``, ``save=ck-out``: a change as the id shows it."""
    text = "=".join(tokens).removeprefix("--").replace("==", "=").replace("{tmp}/", "")
    return text if len(text) <= 24 else text[:21] + "..."


def _mutate(rnd: random.Random, names: list[str], kinds: tuple) -> dict:
    """New tokens for each flag in ``names``, then any companions its values need."""
    out, companions = {}, {}
    for name in names:
        pools = FLAGS[name]
        usable = [k for k in kinds if getattr(pools, k)]
        kind = rnd.choices(usable, [KIND_WEIGHTS[KINDS.index(k)] for k in usable])[0]
        value = rnd.choice(getattr(pools, kind))
        if isinstance(value, tuple):
            value, *extra = value
            companions.update(_tokens(tuple(extra)))
        if is_switch(parser_flags()[name]):
            out[name] = (value,)
        elif value == "" or value.startswith("-"):
            out[name] = (f"{name}={value}",)  # argparse would read "-inf" as a flag
        else:
            out[name] = (name, value)
    return {**out, **companions}
