"""A configuration field (its default, help, flag, choices, type and owners) and the error that
lists every invalid value."""

from __future__ import annotations

from dataclasses import field


class ConfigError(ValueError):
    """An invalid configuration; the message lists every violation found, one per line."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


def opt(default, help: str, flag: str | None = None, choices: tuple | None = None,
        kind: type | None = None, owners: tuple[str, ...] | None = None):
    """A config field with its help, flag (``--field-name``), choices, type (of the default)
    and ``owners``: the strategies it goes with alone (``None``: any strategy)."""
    return field(default=default, metadata={"help": help, "flag": flag, "choices": choices,
                                            "kind": kind or type(default), "owners": owners})


def count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless n is 1: "1 rank", "4 ranks"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def flag_of(f) -> str:
    """The command-line flag of config field ``f``."""
    return f.metadata["flag"] or "--" + f.name.replace("_", "-")
