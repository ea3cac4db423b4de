"""The fuzzer's flag table: for every flag of ``python -m scratchpar.train``, valid, boundary and
hostile values. A strategy that adds a flag adds its entry here (test_launch_fuzz checks).

Valid values are small and quick to train with. Hostile values may be huge only where the engine
must refuse them (invalid, or an allocation past the fuzzer's memory limit), never where they are
valid and merely endless (``--steps 10**30`` alone would run for ever): such a value is a
tuple ``(value, *companion argv)`` that bounds it, as ``endless`` makes for ``--steps``.
``{tmp}`` is the case's own directory, filled by fuzz_files.populate. NOISE is argv that is no
flag's value, appended to a few cases.
"""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass

from scratchpar.train.cli import build_parser

HUGE_INTS = ("2147483648", "9223372036854775808", "1" + "0" * 30, "-9223372036854775809")
BAD_INTS = ("", "1e3", "0x10", "seven", "1.5", " ", "٣")  # "٣": int() reads Arabic digits
HUGE_FLOATS = ("1e300", "1e999", "inf", "-1e300", "-inf")
BAD_FLOATS = ("nan", "-nan", "", "abc", "1,5", "0x1p3", "infinity ")
PATHS_BAD = ("", "/", "{tmp}", "{tmp}/file.txt/x", "{tmp}/binary.bin", "/dev/zero", "/dev/null",
             "/dev/full", "/proc/self/nope", "{tmp}/" + "x" * 300, "{tmp}/dir/", "{tmp}/fifo",
             "{tmp}/loop", "{tmp}/dangling", "{tmp}/loop/x")

NOISE = (("--bogus",), ("stray",), ("--d-mod", "8"), ("--",), ("--steps",), ("-x",),
         ("--lr", "0.01", "--lr", "0.02"), ("--no-progress=1",), ("--config",), ("--help=1",))


@functools.cache
def parser_flags() -> dict[str, argparse.Action]:
    """The CLI's own flags, each under its first option string (``--help`` aside: it stores
    nothing)."""
    return {a.option_strings[0]: a for a in build_parser()._actions
            if a.option_strings and a.dest != argparse.SUPPRESS}


def is_switch(action: argparse.Action) -> bool:
    """A flag that takes no value (``--progress`` / ``--no-progress``)."""
    return action.nargs == 0


@dataclass(frozen=True)
class Pools:
    """Values of one flag; each value is a string, or a tuple (value, *companion argv)."""

    valid: tuple
    boundary: tuple
    hostile: tuple


def ints(valid, boundary=(), hostile=(), huge=True) -> Pools:
    return Pools(tuple(valid), ("0", "1", "-1", *boundary),
                 (*(HUGE_INTS if huge else ()), *BAD_INTS, *hostile))


def floats(valid, boundary=(), hostile=()) -> Pools:
    return Pools(tuple(valid), ("0", "-0.0", "1e-320", "1", *boundary),
                 (*HUGE_FLOATS, *BAD_FLOATS, *hostile))


def choices(flag: str) -> Pools:
    """Every choice of ``flag`` is valid; a wrong case, an empty and a bogus one are not."""
    action = parser_flags()[flag]
    return Pools(tuple(action.choices), (action.choices[0].upper(),), ("", "bogus", " dp"))


def paths(valid, boundary=(), hostile=()) -> Pools:
    return Pools(tuple(valid), tuple(boundary), (*PATHS_BAD, *hostile))


def endless(*values) -> tuple:
    """Huge valid step counts, each bounded by a companion ``--stop-after 2``."""
    return tuple((v, "--stop-after", "2") for v in values)


FLAGS: dict[str, Pools] = {
    "--config": paths(["{tmp}/good.toml"], ["{tmp}/empty.toml", "{tmp}/empty"],
                      ["{tmp}/binary.toml", "{tmp}/truncated.toml", "{tmp}/typed.toml",
                       "{tmp}/unknown.toml", "{tmp}/nested.toml", "{tmp}/huge.toml"]),
    "--model": choices("--model"),
    "--d-model": ints(["8", "16", "24"], ["2", "3"]),
    "--n-heads": ints(["1", "2", "4"], ["3", "16", "17"]),
    "--kv-heads": ints(["1", "2"], ["3", "4"]),
    "--d-ff": ints(["8", "24", "40"], ["2", "5"]),
    "--n-layers": ints(["1", "2"], ["3"]),
    "--d-hidden": ints(["4", "8", "16"]),
    "--hidden-sizes": Pools(("8", "8,8", "4,4,4"), ("", ",", "0", "1", "-1,4", "1,,2", "8,",
                                                    ",".join(["4"] * 2000)),
                            ("2147483648,2", "a,b", "1e3", "1000000,1000000", "8;8", "2,-2")),
    "--dropout": floats(["0.1", "0.5"], ["0.999999", "1.0", "-1e-9"]),
    "--tie-embeddings": Pools(("--tie-embeddings",), ("--no-tie-embeddings",), ()),
    "--source": choices("--source"),
    "--data": paths(["{tmp}/text.txt"], ["{tmp}/short.txt", "{tmp}/file.txt"],
                    ["{tmp}/empty", "{tmp}/dir", "{tmp}/latin1.txt", "{tmp}/missing.txt"]),
    "--seq-len": ints(["4", "8", "12"], ["2", "13", "300"]),
    "--eval-fraction": floats(["0.1", "0.3"], ["0.5", "0.999", "-0.1"]),
    "--vocab-size": ints(["4", "10", "12"], ["3", "5", "2048", "65536"]),
    "--order": ints(["1", "2"], ["3", "6", "7", "21", "22"]),
    "--mean-length": floats(["3", "6.5"], ["1e-9", "1e9"]),
    "--concentration": floats(["0.1", "2"], ["1e-9", "1e9"]),
    "--n-features": ints(["4", "8"], ["2"]),
    "--n-classes": ints(["2", "3"], ["1000", "100000"]),
    "--nnz": ints(["1", "2", "4"], ["3", "5", "392", "393"]),  # ≤ half of --n-features
    "--n-users": ints(["4", "16"], ["2", "100000"]),
    "--n-items": ints(["4", "16"], ["2", "100000"]),
    "--rank": ints(["1", "2", "4"], ["3", "1000"]),
    "--noise": floats(["0.1", "0.5"], ["1e18", "1e20", "1e39"]),  # float32 ratings overflow
    "--optimizer": choices("--optimizer"),
    "--lr": floats(["0.01", "0.001"], ["1e9", "1e30"]),
    "--momentum": floats(["0.5", "0.9"], ["0.999999", "1.0"]),
    "--weight-decay": floats(["0.01", "0.1"], ["1e9"]),
    "--grad-clip": floats(["0.5", "1"], ["1e9"]),
    "--schedule": choices("--schedule"),
    "--warmup": ints(["0", "2"], ["5", "6", "7"]),
    "--min-lr": floats(["0.0001", "0.001"], ["0.006", "0.0061"]),
    "--strategy": choices("--strategy"),
    "--bucket-mb": floats(["0.001", "1"], ["1e-6", "1e-12", "2048"]),
    "--local-sgd-every": ints(["2", "4"], ["5", "6"]),
    "--local-sgd-warmup": ints(["1", "2"], ["6", "7"]),
    "--noise-scale": Pools(("--noise-scale",), ("--no-noise-scale",), ()),
    "--cuda-graph": Pools(("--no-cuda-graph",), ("--cuda-graph",), ()),
    "--zero-stage": ints(["1", "2", "3"], ["4"]),
    "--offload": choices("--offload"),
    "--pp": ints(["1", "2"], ["3", "4", "5"]),
    "--tp": ints(["1", "2"], ["3", "4", "5"]),
    "--cp": ints(["1", "2"], ["3", "4", "5"]),
    "--ep": ints(["1", "2"], ["3", "4"]),
    "--experts": ints(["0", "2", "4"], ["1", "64"]),
    "--top-k": ints(["1", "2"], ["3", "5"]),
    "--moe-every": ints(["1", "2"], ["3"]),
    "--capacity-factor": floats(["0.5", "1.25"], ["1e9"]),
    "--balance-loss": floats(["0.01", "0.1"], ["1e9"]),
    "--z-loss": floats(["0.001", "0.01"], ["1e9"]),
    "--cp-attention": choices("--cp-attention"),
    "--cp-layout": choices("--cp-layout"),
    "--capacity-scope": choices("--capacity-scope"),
    "--servers": ints(["1", "2"], ["3", "4"]),
    "--ps-mode": choices("--ps-mode"),
    "--staleness": ints(["0", "1", "2"], ["5"]),
    "--warmup-sync": ints(["1", "3"], ["6", "7"]),
    "--n-push": ints(["1", "2"], ["3", "7"]),
    "--n-fetch": ints(["1", "2"], ["3", "7"]),
    "--lock": Pools(("--lock",), ("--no-lock",), ()),
    "--window": choices("--window"),
    "--easgd-mode": choices("--easgd-mode"),
    "--rho": floats(["0.5", "10"], ["1e9"]),
    "--tau": ints(["1", "2"], ["3", "7"]),
    "--dp": ints(["1", "2"], ["3", "4"]),
    "--sequence-parallel": Pools(("--sequence-parallel",), ("--no-sequence-parallel",), ()),
    "--pp-schedule": choices("--pp-schedule"),
    "--microbatches": ints(["1", "2", "4"], ["3", "8", "9"]),
    "--virtual": ints(["1", "2"], ["3", "4"]),
    "--balance": choices("--balance"),
    "--pp-costs": Pools(("1:2:1", "1:1.8:0.9"), ("1:2:2", "0:2:1", "1:2", "1:2:0"),
                        ("", "::", "a:b:c", "1:nan:1", "1:inf:1", "1e400:2:1", "1:2:1:1")),
    "--steps": Pools(("3", "6", "8"), ("0", "1", "2", "-1"),
                     (*endless("2147483648", "9223372036854775808", "1" + "0" * 30), *BAD_INTS)),
    "--batch-size": ints(["4", "6", "8"], ["2", "3", "5", "7"]),
    "--seed": ints(["1", "7", "12345"], ["4294967295", "4294967296", "-2"]),
    "--device": choices("--device"),
    "--dtype": choices("--dtype"),
    "--precision": choices("--precision"),
    "--recompute": choices("--recompute"),
    "--grad-reduce": choices("--grad-reduce"),
    "--log-every": ints(["2", "6"], ["5", "7", "1000000"]),
    "--eval-batches": ints(["2", "3"], huge=False),
    "--metrics": paths(["{tmp}/m.jsonl", "{tmp}/new/deep/m.jsonl"]),
    "--save": paths(["{tmp}/ck", "{tmp}/new/deep/ck"], ["{tmp}/dir", "{tmp}/ck/"],
                    ["{tmp}/file.txt"]),
    "--save-every": ints(["2", "3"], ["6", "7"]),
    "--resume": paths([], ["{tmp}/nothing-here", "{tmp}/dir"], ["{tmp}/file.txt"]),  # valid
    # resumes, from checkpoints of other configs and world sizes, are fuzz_cases' scenarios
    "--stop-after": ints(["2", "3"], ["6", "7"]),
    "--target-loss": floats(["3.5", "2.5"], ["-1e300", "1e300"]),
    "--progress": Pools(("--no-progress",), ("--progress",), ()),
    "--print-config": Pools((), ("--print-config",), ()),  # prints the config, trains nothing
    "--trace": paths(["{tmp}/trace.json", "{tmp}/new/deep/trace.json"]),
    "--max-bad-steps": ints(["1", "3"], ["2", "1000000"]),
}
