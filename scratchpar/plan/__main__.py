"""``python -m scratchpar.plan``: rank a run's layouts on a cluster, measure this cluster,
or read a profile.

    python -m scratchpar.plan --world 64 --profile dgx-h100 -- --model gpt --d-model 2048 …
    python -m scratchpar.plan --world 8 --explain 1 -- --model gpt
    python -m scratchpar.plan --world 64 --target 69,2939 -- --model gpt …
    mpiexec -n 2 python -m scratchpar.plan calibrate --out cluster.toml
    python -m scratchpar.plan show scratchpar/plan/profiles/dgx-h100.toml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..backend import DEVICES, BackendError, set_device
from ..comm.abort import abort_on_exception, launched_by_mpi
from .profile import ProfileError, dump, load

PROFILES = Path(__file__).parent / "profiles"
TOP = 20  # rows the ranking shows unless told

EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scratchpar.plan",
                                     description="Measure a cluster's constants, or read a "
                                                 "profile of them.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cal = commands.add_parser("calibrate", help="measure this cluster (under mpiexec, at least "
                              "2 ranks) and write its profile",
                              description="Measure messages between ranks, a reduction, "
                              "compute and memory; write the profile as TOML.")
    cal.add_argument("--out", default="cluster.toml", help="the profile to write "
                     "(default cluster.toml)")
    cal.add_argument("--device", choices=DEVICES, default="cpu", help="where the arrays live")
    cal.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                     help="the training dtype, for FLOP/s (default float32)")
    cal.add_argument("--quick", action="store_true", help="small sizes, few repeats (a smoke "
                     "test: the figures are rough)")
    show = commands.add_parser("show", help="read a profile and print it",
                               description="Read a cluster profile, refuse it with every "
                               "problem, or print it.")
    show.add_argument("profile", help="the TOML file")
    return parser


def plan_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scratchpar.plan",
        usage="python -m scratchpar.plan [--world N] [--profile P] [--memory GIB] [--top K] "
              "[--explain I] [--target S_MIN,E_MIN [--batches B,…]] [-- TRAINING FLAGS]",
        description="Rank every layout of a training run on a cluster: predicted step time, "
                    "throughput, memory per rank and whether it fits. The training flags (the "
                    "model, the data, --batch-size, and any layout flag it pins, --tp for one) "
                    "follow --. Also: calibrate, show (see "
                    "python -m scratchpar.plan calibrate --help).")
    parser.add_argument("--world", type=int, default=4, help="ranks (default 4)")
    parser.add_argument("--profile", default="dgx-h100", help="a cluster profile: a TOML file, "
                        f"or one shipped: {', '.join(shipped())} (default dgx-h100)")
    parser.add_argument("--memory", type=float, help="GiB a device may hold (default: the "
                        "profile's)")
    parser.add_argument("--top", type=int, default=TOP, help=f"rows shown (default {TOP}; 0: "
                        "all)")
    parser.add_argument("--explain", type=int, metavar="I", help="the breakdown of row I, and "
                        "the line that runs it")
    parser.add_argument("--target", metavar="S_MIN,E_MIN", help="rank global batches by the "
                        "time to a target loss instead: the run needs S_min + E_min/B steps at "
                        "batch B (python -m scratchpar.batch steps fits them)")
    parser.add_argument("--batches", metavar="B,…", help="with --target, the global batches "
                        "weighed (default: the run's --batch-size ×1/4 to ×16, by doubling)")
    return parser


def shipped() -> list[str]:
    return sorted(p.stem for p in PROFILES.glob("*.toml"))


def rank_layouts(argv: list[str]) -> int:
    """Rank the layouts of the run after ``--``; print the table, or one row's breakdown."""
    from ..train.cli import load_config
    from ..train.option import ConfigError
    from .layouts import alone, pinned
    from .rank import explain, ranked, show

    ours, run = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, [])
    args = plan_parser().parse_args(ours)
    try:
        if args.world < 1:
            raise ValueError(f"--world must be at least 1, got {args.world}")
        path = PROFILES / f"{args.profile}.toml" if args.profile in shipped() else args.profile
        profile = load(path)
        budget = None if args.memory is None else int(args.memory * 2**30)
        base = load_config(alone(run), planning=True)  # the run's flags, checked first
        if args.target is not None:
            return reach_target(args, run, profile, budget, base.train.batch_size)
        rows = ranked(run, args.world, profile, budget, shown=sys.stderr.isatty())
    except (ProfileError, ConfigError, ValueError) as e:
        print(f"scratchpar.plan: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not rows:
        pins = " ".join(f"{flag} {value or ''}".strip() for flag, value in pinned(run).items())
        print(f"scratchpar.plan: no layout of this run runs on {args.world} ranks"
              + (f" with {pins}" if pins else ""), file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.explain is not None:
        if not 1 <= args.explain <= len(rows):
            print(f"scratchpar.plan: --explain takes a row from 1 to {len(rows)}",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
        print(explain(rows[args.explain - 1], args.world, run))
        return 0
    print(show(rows[:args.top or len(rows)], args.world, profile))
    best = rows[0]
    if best.fit.fits:
        print(f"\nbest: {best.layout.command(args.world, run)}")
    else:
        print(f"\nno layout fits: the closest {best.fit.why_not()}; more ranks, a smaller "
              "batch or a device with more memory (--memory) may help")
    return 0


def positive_numbers(text: str, what: str, kind=float) -> list:
    """``text``'s comma-separated numbers, each positive, or a ValueError saying ``what``."""
    try:
        values = [kind(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"{what} takes comma-separated numbers, got {text!r}") from None
    if not all(v > 0 for v in values):
        raise ValueError(f"{what} takes positive numbers, got {text!r}")
    return values


def reach_target(args, run: list[str], profile, budget: int | None, batch: int) -> int:
    """Rank global batches by the predicted time to the target; print the table and the line
    that runs the fastest."""
    from .regimes import Regimes
    from .target import at_batch, reaches, show

    values = positive_numbers(args.target, "--target")
    if len(values) != 2:
        raise ValueError(f"--target takes S_MIN,E_MIN, got {args.target!r}")
    regimes = Regimes(*values)
    batches = positive_numbers(args.batches, "--batches", int) if args.batches else \
        sorted({max(1, batch * 2**k // 4) for k in range(7)})
    found = reaches(run, args.world, profile, regimes, batches, budget)
    if not found:
        print(f"scratchpar.plan: no exact layout fits at any of the batches {batches}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    print(show(found[:args.top or len(found)], args.world, profile, regimes))
    fastest = found[0]
    line = fastest.best.layout.command(args.world, at_batch(run, fastest.batch))
    print(f"\nbest: {line}")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in ("calibrate", "show"):  # --help: the ranking's, which
        return rank_layouts(argv)  # names the two commands beside it
    args = build_parser().parse_args(argv)
    if args.command == "show":
        try:
            print(dump(load(args.profile)), end="")
        except ProfileError as e:
            print(f"scratchpar.plan: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        return 0
    return calibrate(args)


def calibrate(args) -> int:
    """Measure under mpiexec; rank 0 prints the figures and writes the profile."""
    if not launched_by_mpi():
        print("scratchpar.plan: calibrate measures messages between ranks: run it under "
              "mpiexec, e.g. mpiexec -n 2 python -m scratchpar.plan calibrate", file=sys.stderr)
        return EXIT_BAD_INPUT
    from ..allocator import keep_freed_memory
    from ..comm.mpi import Communicator  # loads MPI: only under mpiexec
    from .calibrate import calibrate as measure
    from .report import table

    comm = Communicator(name="world")
    if comm.size < 2:
        if comm.rank == 0:
            print("scratchpar.plan: calibrate needs at least 2 ranks, one message's two ends",
                  file=sys.stderr)
        return EXIT_BAD_INPUT
    abort_on_exception(comm)
    try:
        set_device(args.device, comm.local_rank, comm.local_size)
    except BackendError as e:
        if comm.rank == 0:
            print(f"scratchpar.plan: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    keep_freed_memory()  # the training command's allocator: its steps are what is priced
    profile, found = measure(comm, args.device, args.dtype, args.quick)
    if comm.rank == 0:
        print(table(profile, found))
        Path(args.out).write_text(dump(profile))
        print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
