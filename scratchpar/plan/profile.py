"""A cluster profile: the constants the cost model reads, measured here or taken from datasheets.

Stored as a TOML file (``python -m scratchpar.plan calibrate`` writes one; a person can write
one for a machine that is not here)::

    name = "…"                       what the cluster is
    source = "…"                     where the figures come from: a calibration, datasheets
    ranks_per_node = 8               devices (ranks) per node
    [device]
    name = "…"
    memory_bytes = 85899345920       what one rank may hold
    flops = 9.9e14                   FLOP/s of a large matrix product in 16 bits (a GPU's
                                     tensor cores), or in the one dtype a calibration timed
    flops_fp32 = 6.7e13              the same in fp32, where it is slower (left out: flops)
    bytes_per_s = 3.35e12            memory bandwidth: elementwise ops move this many bytes/s
    [node]                           a message within a node: alpha_s + n·beta_s_per_byte
    alpha_s = 5e-6
    beta_s_per_byte = 2.2e-12
    [network]                        between nodes (left out: the cluster is one node)
    alpha_s = …
    beta_s_per_byte = …
    [reduce]
    gamma_s_per_byte = …             adding n bytes into a buffer costs n·gamma_s_per_byte
    [kernels]                        the kernel model (kernels.py; left out: the roofline)
    kind = "fused"                   the kernels it describes: engine, fused or flash
    efficiency = 0.6                 η: a large product's share of the peak
    half_size = 64                   n½: the smallest size at which a product runs at η/2
    launch_s = 5e-6                  a kernel's fixed seconds
    [engine]
    process_bytes = 536870912        what a rank maps before its arrays
    call_s = 1.5e-5                  a collective call's own seconds beyond its messages
    array_s = 9e-6                   an update's seconds per array it steps, beyond its bytes

A file is read whole or refused with every problem listed.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

from .kernels import KINDS, Kernels


class ProfileError(ValueError):
    """A profile file that cannot be read; the message lists every problem."""

    def __init__(self, path, problems: list[str]):
        self.problems = problems
        super().__init__(f"{path}: not a cluster profile:\n"
                         + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class Link:
    """A point-to-point message of n bytes takes ``alpha_s + n · beta_s_per_byte`` seconds
    (Hockney 1994)."""

    alpha_s: float
    beta_s_per_byte: float

    def seconds(self, nbytes: float, messages: float = 1.0) -> float:
        return messages * self.alpha_s + nbytes * self.beta_s_per_byte


@dataclass(frozen=True)
class Device:
    name: str
    memory_bytes: int
    flops: float
    bytes_per_s: float
    flops_fp32: float = 0.0

    def rate(self, precision: str) -> float:
        """FLOP/s of a large product of a run in ``precision`` (fp32, fp16 or bf16): a GPU's
        tensor cores take 16-bit operands (Micikevicius et al. 2018, §1), fp32 runs on its
        plain cores unless it has no separate figure."""
        return self.flops_fp32 if precision == "fp32" and self.flops_fp32 else self.flops


@dataclass(frozen=True)
class Reduce:
    gamma_s_per_byte: float


@dataclass(frozen=True)
class Engine:
    """What a process maps before its arrays, and the engine's own seconds per collective
    call beyond its messages (planning, buffers, its handle: Python's cost) and per array an
    update steps beyond its bytes (the optimizer's ops on it, each a call), 0 where unknown."""

    process_bytes: int
    call_s: float = 0.0
    array_s: float = 0.0


@dataclass(frozen=True)
class Profile:
    name: str
    source: str
    ranks_per_node: int
    device: Device
    node: Link
    reduce: Reduce
    engine: Engine
    network: Link | None = None  # None: one node
    kernels: Kernels | None = None  # None: a product at the peak, nothing else (the roofline)

    def link(self, same_node: bool) -> Link:
        """The link a message between two ranks crosses."""
        return self.node if same_node or self.network is None else self.network


TABLES = {"device": Device, "node": Link, "network": Link, "reduce": Reduce, "engine": Engine,
          "kernels": Kernels}
OPTIONAL = {"network", "kernels"}


def load(path: str | Path) -> Profile:
    """The profile in the TOML file ``path``. Raises ProfileError listing every problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError(path, [str(e)]) from None
    return loads(text, path)


def loads(text: str, where: str | Path = "<profile>") -> Profile:
    """The profile in the TOML ``text`` (read from ``where``, for the messages)."""
    try:
        table = tomllib.loads(text)
    except ValueError as e:  # TOMLDecodeError is a ValueError
        raise ProfileError(where, [str(e)]) from None
    problems, values = [], {}
    top = {f.name: f for f in fields(Profile) if f.name not in TABLES}
    for key in table.keys() - top.keys() - TABLES.keys():
        problems.append(f"unknown key {key}")
    for name, f in top.items():
        values[name] = _value(table, name, f.type, problems)
    for name, cls in TABLES.items():
        if name not in table:
            if name not in OPTIONAL:
                problems.append(f"no [{name}] table")
            continue
        if not isinstance(table[name], dict):
            problems.append(f"{name} is not a table")
            continue
        entries = table[name]
        for key in entries.keys() - {f.name for f in fields(cls)}:
            problems.append(f"unknown key {name}.{key}")
        values[name] = cls(**{f.name: _value(entries, f.name, f.type, problems, f"{name}.",
                                             f.default)
                              for f in fields(cls) if f.name in entries
                              or f.default is MISSING})
    kernels = values.get("kernels")
    if kernels is not None and kernels.kind not in KINDS:
        problems.append(f"kernels.kind must be one of {', '.join(KINDS)}, not {kernels.kind!r}")
    if kernels is not None and not 0 < kernels.efficiency <= 1:
        problems.append(f"kernels.efficiency is a share of the peak, in (0, 1], not "
                        f"{kernels.efficiency!r}")
    if problems:
        raise ProfileError(where, sorted(problems))
    return Profile(**values)


def _value(table: dict, key: str, kind: str, problems: list[str], prefix: str = "",
           default=MISSING):
    """``table[key]`` checked against its field's type: a string, or a positive finite
    number (an integer where the field is one; 0 too where 0 is the field's default)."""
    if key not in table:
        problems.append(f"{prefix}{key} is missing")
        return None
    value = table[key]
    if kind == "str":
        if not isinstance(value, str):
            problems.append(f"{prefix}{key} must be a string, not {value!r}")
        return value
    integer = kind == "int"
    least = 0 if default == 0 else math.nextafter(0, 1)
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)) \
            or not math.isfinite(value) or value < least:
        what = ("a positive integer" if integer else "a positive number") if least \
            else "a number ≥ 0"
        problems.append(f"{prefix}{key} must be {what}, not {value!r}")
        return value
    return value if integer else float(value)


def dump(profile: Profile) -> str:
    """``profile`` as a TOML file that :func:`load` reads back to an equal profile."""
    lines = [f"{f.name} = {_toml(getattr(profile, f.name))}" for f in fields(Profile)
             if f.name not in TABLES]
    for name in TABLES:
        part = getattr(profile, name)
        if part is None:
            continue
        lines += ["", f"[{name}]"] + [f"{f.name} = {_toml(getattr(part, f.name))}"
                                      for f in fields(part)]
    return "\n".join(lines) + "\n"


def _toml(value) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)
