"""The layouts a planner weighs for one run on a world of ranks: every strategy and split the
training command offers, each kept only where the command accepts it for that world.

A layout is the flags it adds to the run's own (the model, the data, the global batch): the
strategy and its knobs. Candidates are drawn from every family:

- data parallelism: bucketed, naive, local SGD; ZeRO stages 1–3, with and without offload;
- pipelines: each schedule, with p stages over the world's divisors, m = p, 2p and 4p
  micro-batches, and v = 2 model chunks for the interleaved schedule;
- the hybrid dp × pp × tp mesh over every factorization of the world: m = 2p micro-batches
  (one at p = 1),
  with and without sequence parallelism; and micro-batches of one row, with selective
  recomputation and sequence parallelism or with full recomputation, as the largest
  published runs train (Narayanan et al. 2021, §5.1; Korthikanti et al. 2022, §6);
- for a GPT, the mesh with its sequences over cp as well (every factorization with cp > 1,
  ring and Ulysses attention, sequence parallelism where tp > 1), as Llama 3 trained its long
  contexts (Dubey et al. 2024, §3.3.2);
- for a sparse GPT, each hybrid mesh with its experts over every ep dividing its dp × cp
  ranks (Liu et al. 2025's parallel folding);
- parameter servers: each mode, 1 to ⌊world/2⌋ servers;
- Hogwild and EASGD's three modes.

A run may pin some of these flags itself (``--pp-schedule zb-h1``, ``--tp 8``, ``--pp-costs
…``): each candidate then takes the run's value for it, and one of another ``--strategy`` is
dropped. Each candidate goes through the training command's own parsing and rules
(``train/cli.py: load_config``), so a layout the planner ranks is one ``mpirun`` can start; a
pinned knob its family does not take (micro-batches for ZeRO) drops it there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..parallel.pipeline.schedules import default_m
from ..train.cli import load_config
from ..train.option import ConfigError

SCHEDULES = ("naive", "gpipe", "1f1b", "interleaved", "bprio", "zb-h1")
CHOSEN = ("--strategy", "--dp", "--pp", "--tp", "--cp", "--ep", "--pp-schedule", "--microbatches",
          "--virtual", "--pp-costs", "--sequence-parallel", "--cp-attention", "--zero-stage",
          "--offload", "--servers", "--ps-mode", "--easgd-mode")  # the flags a layout adds


SWITCHES = ("--sequence-parallel",)  # the chosen flags that take no value


def pinned(run: list[str]) -> dict[str, str | None]:
    """The flags of ``run`` that a layout would choose, each with the run's value (None for a
    switch): ``--tp=2 --pp-costs 1:2:1`` → ``{"--tp": "2", "--pp-costs": "1:2:1"}``."""
    pins, words = {}, iter(run)
    for word in words:
        flag, equals, value = word.partition("=")
        if flag in CHOSEN:
            pins[flag] = value if equals else None if flag in SWITCHES else next(words, None)
            if flag not in SWITCHES and not pins[flag]:
                raise ValueError(f"{flag} pins a layout's value: give it one")
    return pins


def without(run: list[str], flags) -> list[str]:
    """``run`` less each of ``flags`` and its value."""
    kept, words = [], iter(run)
    for word in words:
        flag, equals, _ = word.partition("=")
        if flag not in flags:
            kept.append(word)
        elif not equals and flag not in SWITCHES:
            next(words, None)  # its value
    return kept


def pin(flags: tuple[str, ...], pins: dict) -> tuple[str, ...] | None:
    """A candidate's ``flags`` with the run's ``pins`` in place of its own choices, added where
    it makes none; None where the run pins another strategy."""
    if pins.get("--strategy", flags[1]) != flags[1]:
        return None
    out = list(flags)
    for flag, value in pins.items():
        given = [] if value is None else [value]
        if flag not in out:
            out += [flag, *given]
        elif given:
            out[out.index(flag) + 1] = value
    return tuple(out)


@dataclass(frozen=True)
class Layout:
    """The flags a layout adds to a run's, and the run's config with them."""

    flags: tuple[str, ...]
    cfg: object

    def command(self, world: int, run: list[str]) -> str:
        """The line that starts it: ``mpirun -n WORLD python -m scratchpar.train …``, the
        run's own flags less those the layout sets again (``--recompute``)."""
        again = {word for word in self.flags if word.startswith("--")}
        return " ".join(["mpirun", "-n", str(world), "python", "-m", "scratchpar.train",
                         *without(run, again), *self.flags])


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(world: int, rows: int = 0, sparse: bool = False) -> Iterator[tuple[str, ...]]:
    """Every layout's flags for ``world`` ranks and a global batch of ``rows``, whether or
    not the run accepts them; for a ``sparse`` model, each hybrid mesh with its experts over
    every ep that folds onto its dp × cp ranks too."""
    for flags in _candidates(world, rows):
        yield flags
        if sparse and flags[1] == "hybrid":
            replicas = int(flags[flags.index("--dp") + 1]) * (
                int(flags[flags.index("--cp") + 1]) if "--cp" in flags else 1)
            for ep in divisors(replicas)[1:]:
                yield (*flags, "--ep", str(ep))


def _candidates(world: int, rows: int) -> Iterator[tuple[str, ...]]:
    """Every layout's flags but the expert axis's."""
    yield ("--strategy", "dp")
    yield ("--strategy", "dp-naive")
    yield ("--strategy", "local-sgd")
    for stage in (1, 2, 3):
        for offload in ("none", "cpu"):
            yield ("--strategy", "zero", "--zero-stage", str(stage), "--offload", offload)
    for p in divisors(world)[1:]:
        for schedule in SCHEDULES:
            for m in (1,) if schedule == "naive" else (p, 2 * p, 4 * p):
                virtual = ("--virtual", "2") if schedule == "interleaved" else ()
                yield ("--strategy", "pipeline", "--pp", str(p), "--pp-schedule", schedule,
                       "--microbatches", str(m), *virtual)
    for tp in divisors(world)[1:]:
        for pp in divisors(world // tp):
            mesh = ("--strategy", "hybrid", "--dp", str(world // (tp * pp)), "--pp", str(pp),
                    "--tp", str(tp), "--pp-schedule", "1f1b", "--microbatches", str(default_m(pp)))
            yield mesh
            yield (*mesh, "--sequence-parallel")
            single = -(-rows // (world // (tp * pp)))  # a replica's rows, one a micro-batch
            if single > default_m(pp):
                mesh = (*mesh[:-1], str(single))
                yield (*mesh, "--recompute", "selective", "--sequence-parallel")
                yield (*mesh, "--recompute", "full")
    for cp in divisors(world)[1:]:  # a GPT's sequences over cp, beside every other split
        for tp in divisors(world // cp):
            for pp in divisors(world // (cp * tp)):
                sp = ("--sequence-parallel",) if tp > 1 else ()
                for attention in ("ring", "ulysses"):
                    yield ("--strategy", "hybrid", "--dp", str(world // (cp * tp * pp)),
                           "--pp", str(pp), "--cp", str(cp), "--tp", str(tp),
                           "--cp-attention", attention, "--pp-schedule", "1f1b",
                           "--microbatches", str(default_m(pp)), *sp)
    for servers in range(1, world // 2 + 1):
        for mode in ("sync", "ssp", "async"):
            yield ("--strategy", "ps", "--servers", str(servers), "--ps-mode", mode)
    yield ("--strategy", "hogwild")
    for mode in ("sync", "async", "round-robin"):
        yield ("--strategy", "easgd", "--easgd-mode", mode)


def layouts(run: list[str], world: int) -> list[Layout]:
    """Every layout of the run ``run`` (its flags: model, data, batch, and any it pins) that
    the training command accepts on ``world`` ranks."""
    cfg = load_config(alone(run), planning=True)
    found, rows, pins, seen = [], cfg.train.batch_size, pinned(run), set()
    for flags in candidates(world, rows, sparse=cfg.model.experts > 0):
        flags = pin(flags, pins)
        if flags is None or flags in seen:
            continue
        seen.add(flags)
        try:
            found.append(Layout(flags, load_config([*run, *flags], world, planning=True)))
        except ConfigError:
            continue
    return found


def alone(run: list[str]) -> list[str]:
    """The run on one device, less the layout flags it pins: what every model trains under,
    its own flags checked before any layout."""
    return [*without(run, CHOSEN), "--strategy", "single"]
