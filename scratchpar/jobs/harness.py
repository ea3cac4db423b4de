"""The harness a measuring command runs under (each benchmark, each batch-size command): its
flags, its device's name, figures and JSON."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from .. import backend
from ..allocator import keep_freed_memory
from ..trace.figure import save
from .mpijob import JobFailed


@dataclass(frozen=True)
class Ranks:
    """A benchmark's ``--ranks``: comma-separated sizes, each at least ``least``, one job each
    (``default``'s without the flag, ``quick``'s under --quick)."""

    default: tuple[int, ...]
    quick: tuple[int, ...] | None = None  # None: the default's
    least: int = 1
    what: str = "world sizes"  # what each size is, for the help
    more: str = ""  # what else the help says: what a job does with its size

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """The flag, which parses into sorted distinct sizes and refuses one below ``least``."""
        default = ",".join(map(str, self.default))
        quick = "" if self.quick is None else "; --quick: " + ",".join(map(str, self.quick))
        parser.add_argument("--ranks", type=self.parse, help=(
            f"comma-separated {self.what}" + (f", each ≥ {self.least}" if self.least > 1 else "")
            + f" (default {default}{quick})" + (f"; {self.more}" if self.more else "")))

    def parse(self, text: str) -> list[int]:
        """'4,2,4' → [2, 4]; a size below ``least`` is an error argparse reports."""
        sizes = sorted(set(ints(text)))
        if sizes[0] < self.least:
            raise argparse.ArgumentTypeError(
                f"every size must be at least {self.least}, got {text}")
        return sizes

    def chosen(self, given: list[int] | None, quick: bool) -> list[int]:
        """The sizes a run takes: ``given`` (the flag's), else the default of its mode."""
        return given or list(self.quick if quick and self.quick else self.default)


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: ``measure(args)`` prints its tables and returns what ``--json`` writes."""

    summary: str  # one line, the launcher's help
    quick: str  # what --quick runs instead
    measure: Callable[[argparse.Namespace], dict]
    add_arguments: Callable[[argparse.ArgumentParser], None] = lambda parser: None
    figures: str | None = None  # what --figures DIR writes; None: the benchmark draws nothing
    indent: int | None = 2  # of the JSON; None: compact (records of every step)
    ranks: Ranks | None = None  # its --ranks flag, into ``args.ranks``; None: it has none


def main(benchmarks: dict[str, Benchmark], argv=None, prog: str = "python -m scratchpar.bench",
         description: str = "Run one of scratchpar's benchmarks.") -> int:
    """Parse ``<name> [flags]``, run that benchmark, write its JSON; the exit status."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    names = parser.add_subparsers(dest="name", metavar="<name>", required=True,
                                  help=f"one of: {', '.join(benchmarks)}")
    for name, bench in benchmarks.items():
        sub = names.add_parser(name, help=bench.summary, description=bench.summary)
        if bench.ranks:
            bench.ranks.add_to(sub)
        bench.add_arguments(sub)
        sub.add_argument("--quick", action="store_true", help=f"{bench.quick} (smoke test)")
        sub.add_argument("--json", metavar="PATH", help="also write every number to this file")
        if bench.figures:
            sub.add_argument("--figures", metavar="DIR", help=f"write into DIR: {bench.figures}")
        sub.add_argument("--device", choices=backend.DEVICES, default="cpu",
                         help="where scratchpar's arrays live: cpu (NumPy), cuda (CuPy), or "
                              "double (CuPy's rules on the CPU: checks the GPU path, times "
                              "nothing real); default cpu")
        sub.set_defaults(figures=None)
    args = parser.parse_args(argv)
    args.load_before = os.getloadavg()[0]  # for machine(args)
    bench = benchmarks[args.name]
    if bench.ranks:
        args.ranks = bench.ranks.chosen(args.ranks, args.quick)
    keep_freed_memory()  # what the driver times in-process too
    try:
        record = bench.measure(args)
    except JobFailed as failure:
        print(f"{args.name}: {failure}", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": describe(args.device), "quick": args.quick, **record}, f,
                      indent=bench.indent, separators=None if bench.indent else (",", ":"))
    return 0


def ints(text: str) -> list[int]:
    """A flag's comma-separated integers: '1,2,4' → [1, 2, 4]."""
    return [int(n) for n in text.split(",")]


def describe(device: str) -> str:
    """The device as a table header names it: 'cuda (NVIDIA H100 80GB HBM3)', 'cpu (NumPy)'…"""
    if device == "cuda":
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]  # bytes in CuPy ≤ 13
        return f"cuda ({name.decode() if isinstance(name, bytes) else name}, CuPy)"
    if device == "double":
        return "double (CuPy's rules on the CPU: a check of the GPU path, not a GPU timing)"
    return "cpu (NumPy)"


def machine(args) -> str:
    """The cores and the 1-minute load average before the benchmark and now, for a header."""
    return (f"{os.cpu_count()} cores, one thread per rank; load average (1 min) before "
            f"{args.load_before:.2f}, after {os.getloadavg()[0]:.2f}")


def headline(what: str, args) -> str:
    """A measuring command's first line: ``what`` on which device, and :func:`machine`."""
    return f"{what} on {describe(args.device)}, {machine(args)}"


def verdict(device: str, met: bool | None, missing: str = "n/a") -> str:
    """A target's verdict: PASS or MISS; ``missing`` where nothing was measured (``met`` None),
    and none on the double, whose timings measure nothing real."""
    if met is None:
        return missing
    return "n/a (double)" if device == "double" else ("PASS" if met else "MISS")


def judge(device: str, measured: float | None, *, at_most: float | None = None,
          at_least: float | None = None, missing: str = "n/a") -> str:
    """The :func:`verdict` on ``measured`` against its goal: PASS when it is at most
    ``at_most`` and at least ``at_least`` (each where given); ``missing`` where nothing was
    measured (None or NaN)."""
    if measured is None or math.isnan(measured):
        return verdict(device, None, missing)
    return verdict(device, (at_most is None or measured <= at_most)
                   and (at_least is None or measured >= at_least))


def staging(device: str, cuda_aware: bool) -> str:
    """How device buffers reach MPI in this run (Communicator.cuda_aware), for the tables' notes."""
    if device == "cpu":
        return "host buffers: MPI reads them in place"
    if cuda_aware:
        return "MPI is CUDA-aware: it reads device buffers itself, after a stream sync"
    return ("MPI is not CUDA-aware: device buffers are staged through pinned host memory, "
            "by every contender alike")


def finish(fig, out: str, axes=(), dpi: int = 120, legend: bool = True, rect=(0, 0, 1, 1),
           **grid) -> str:
    """A figure's last steps: each of ``axes`` gridded (``grid``: its options) and, with
    ``legend``, labelled; the layout tightened into ``rect``, the PNG written: its path."""
    for ax in axes:
        ax.grid(alpha=0.3, **grid)
        if legend:
            ax.legend(frameon=False, fontsize=8)
    fig.tight_layout(rect=rect)
    return str(save(fig, out, dpi=dpi))


def draw_figures(directory, draw, *args, without: str = "") -> list[str]:
    """The paths ``draw(directory, *args)`` wrote, printed; ``[]`` without a ``directory``,
    or without matplotlib (``without``: what the benchmark still writes then, e.g. its traces)."""
    if not directory:
        return []
    if importlib.util.find_spec("matplotlib") is None:
        print(f"\nfigures: matplotlib missing (pip install 'scratchpar[plot]'){without}")
        return []
    figures = [str(path) for path in draw(directory, *args)]
    print("\nfigures: " + ", ".join(figures))
    return figures


def stacked(ax, x, layers, width: float) -> None:
    """Bars at ``x`` stacked from each (label, color, heights) of ``layers`` in turn."""
    bottom = [0.0] * len(x)
    for label, color, heights in layers:
        ax.bar(x, heights, width, bottom=bottom, color=color, label=label)
        bottom = [b + h for b, h in zip(bottom, heights)]
