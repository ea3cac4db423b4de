"""The command line and TOML files: parse them into a validated Config, or list every problem."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import textwrap
import tomllib
from pathlib import Path

from . import resume
from .config import SECTIONS, Config, RunConfig, TrainConfig
from .defaults import fill_defaults
from .option import ConfigError, flag_of
from .strategies import FAMILIES, REGISTRY
from .toml_keys import suggestion, to_toml
from .validate import validate

MAX_CONFIG_BYTES = 1 << 20  # a --config file larger than this is not a run configuration


class _Parser(argparse.ArgumentParser):
    """argparse that raises ConfigError instead of printing its usage and exiting, so that a
    bad flag is reported like every other invalid value (once per job, not once per rank)."""

    def error(self, message: str):
        raise ConfigError([f"{message} (python -m scratchpar.train --help lists the flags)"])


USAGE = "python -m scratchpar.train [--config FILE] [--strategy NAME] [--FLAG VALUE …]"
TOML_NOTE = """\
A --config file sets the same values in TOML tables [model], [data], [optim] and
[train], each key its flag's name with _ for - (--d-model is [model] d_model),
except --model, which is [model] kind, and --data, which is [data] path. Flags
override the file. --print-config prints a run's whole config in that form."""


class _Help(argparse.Action):
    """``--help``: the flags of every run and the strategies; ``--help STRATEGY``: the
    flags that strategy owns."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs="?", metavar="STRATEGY",
                         help="show the flags of every run, or those of one strategy, and exit")

    def __call__(self, parser, namespace, value, option_string=None):
        if value is not None and value not in REGISTRY:
            raise ConfigError([f"--help {value}: not a strategy; one of {', '.join(REGISTRY)}"])
        build_parser(shown=value or "run").print_help()
        parser.exit()


def build_parser(shown: str = "all") -> argparse.ArgumentParser:
    """The parser of every flag (``shown`` "all"). For ``--help``, one that shows the flags
    of every run ("run") or those a strategy owns (its name)."""
    strategies = "\n".join(f"  {name:<10} {family.names[name]}"
                            for name, family in REGISTRY.items())
    epilog = (f"strategies (--strategy; the flags each owns: --help STRATEGY):\n{strategies}"
              f"\n\n{TOML_NOTE}") if shown in ("run", "all") else None
    parser = _Parser(
        prog="python -m scratchpar.train", usage=USAGE, epilog=epilog, add_help=False,
        description="Train a model with scratchpar. Values come from defaults, then --config "
                    "TOML, then these flags." if shown in ("run", "all") else
                    textwrap.fill(f"--strategy {shown}: {REGISTRY[shown].names[shown]}. The "
                                  "flags it owns, and those that tune any strategy; every "
                                  "run's flags: --help.", 80),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS)
    parser.add_argument("-h", "--help", action=_Help)
    parser.add_argument("--config", metavar="FILE", help="TOML file of [model] [data] [optim] "
                        "[train] tables")
    parser.add_argument("--print-config", action="store_true", dest="print_config",
                        help="print the run's whole config as TOML, and exit")
    for section, cls in SECTIONS.items():
        for title, declared, owners in _groups(section, cls):
            if shown == "all" or owners == ANY or (
                    shown in owners if owners != EVERY_RUN else shown == "run"):
                _add_flags(parser.add_argument_group(title), section, declared)
    return parser


@functools.cache
def _every_flag() -> argparse.ArgumentParser:
    """The parser of every flag, built once: it holds no run's values, and a planner parses a
    run for each of hundreds of layouts (``plan/layouts.py``)."""
    return build_parser()


EVERY_RUN, ANY = ("every run",), ()  # the owners of a section's group, and of a family's
#                                      flags that tune any strategy


def _groups(section: str, cls) -> list[tuple[str, tuple, tuple]]:
    """The ``--help`` groups of a section: one; the train section's run fields, then each
    family's flags under the strategies they go with (their owners)."""
    if cls is not TrainConfig:
        return [(section, dataclasses.fields(cls), EVERY_RUN)]
    groups = [(section, dataclasses.fields(RunConfig), EVERY_RUN)]
    for family in FAMILIES:
        declared = dataclasses.fields(family.flags)
        owners = tuple(dict.fromkeys(o for f in declared for o in f.metadata["owners"] or ()))
        groups.append((f"{section}, with --strategy {' or '.join(owners)}" if owners else
                       f"{section}, with any strategy", declared, owners))
    return groups


def _add_flags(group, section: str, declared) -> None:
    for f in declared:
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
        group.add_argument(flag_of(f), **kw)


def _show(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _int_tuple(text: str) -> tuple:
    try:
        return tuple(int(v) for v in text.split(",")) if text.strip() else ()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}")\
            from None


def load_config(argv: list[str] | None = None, world_size: int = 1,
                planning: bool = False) -> Config:
    """Parse flags (and the TOML file they name) into a Config validated for ``world_size``
    ranks, or raise ConfigError. With ``--resume``, the checkpoint's run fills what neither
    names (``resume.py``). With ``--print-config``, print the config as TOML and exit.
    ``planning``: a run the planner prices and does not start, whose data is not built (no
    rule about building it applies, ``validate.py``)."""
    args = vars(_every_flag().parse_args(argv))
    print_config = args.pop("print_config", False)
    given: dict[str, dict] = {s: {} for s in SECTIONS}  # section → name → (value, where)
    problems: list[str] = []
    if "config" in args:
        path = Path(args.pop("config"))
        for section, names in _read_toml(path, problems).items():
            given[section].update({k: (v, f"--config {path}: ") for k, v in names.items()})
    for key, value in args.items():
        section, name = key.split(".")
        given[section][name] = (value, "")
    values = {s: {k: v for k, (v, _) in names.items()} for s, names in given.items()}
    if values["train"].get("resume"):
        trained, bad = resume.trained_with(values["train"]["resume"], values["train"])
        problems += bad + resume.contradictions(values["train"]["resume"], trained, given)
        values = {s: {**trained.get(s, {}), **values[s]} for s in SECTIONS}
    if values["data"].get("path") and "source" not in values["data"]:
        values["data"]["source"] = "text"
    if problems:
        raise ConfigError(problems)
    config = make_config(values, world_size, check=not print_config, planning=planning)
    if print_config:  # as --help does: print, and end the run here (for any world size)
        print(to_toml(config), end="")
        raise SystemExit(0)
    return config


def _read_toml(path: Path, problems: list[str]) -> dict[str, dict]:
    """The per-section values of the TOML file at ``path``; a line in ``problems`` for each
    thing wrong with it."""
    values: dict[str, dict] = {}
    try:
        if not path.is_file():
            raise ValueError("no such file" if not path.exists() else "not a regular file")
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ValueError(f"{path.stat().st_size:,} bytes; a configuration is a short TOML "
                             "file")
        table = tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        problems.append(f"--config {path}: not UTF-8 text ({e.reason} at byte {e.start})")
        return values
    except (OSError, ValueError) as e:  # TOMLDecodeError is a ValueError
        problems.append(f"--config {path}: {e}")
        return values
    for section, entries in table.items():
        if section not in SECTIONS or not isinstance(entries, dict):
            problems.append(f"--config {path}: unknown table [{section}]")
            continue
        known = {f.name: f for f in dataclasses.fields(SECTIONS[section])}
        for name, value in entries.items():
            if name not in known:
                problems.append(f"--config {path}: unknown key {section}.{name}"
                                + suggestion(SECTIONS, section, name))
            else:
                values.setdefault(section, {})[name] = \
                    tuple(value) if isinstance(value, list) else value
    return values


def make_config(values: dict[str, dict], world_size: int = 1, check: bool = True,
                planning: bool = False) -> Config:
    """Build a Config from per-section overrides and, with ``check``, validate it for
    ``world_size`` ranks (raises ConfigError); ``planning``, as :func:`load_config`'s."""
    values = {s: dict(values.get(s, {})) for s in SECTIONS}
    problems = _type_problems(values)
    if problems:
        raise ConfigError(problems)
    fill_defaults(values, TrainConfig.steps)
    config = Config(**{s: cls(**values[s]) for s, cls in SECTIONS.items()})
    problems = validate(config, world_size, planning) if check else []
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
