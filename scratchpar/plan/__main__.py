"""``python -m scratchpar.plan calibrate|show``: measure this cluster, or read a profile.

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


def main(argv=None) -> int:
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
        set_device(args.device, comm.local_rank)
    except BackendError as e:
        if comm.rank == 0:
            print(f"scratchpar.plan: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    profile, found = measure(comm, args.device, args.dtype, args.quick)
    if comm.rank == 0:
        print(table(profile, found))
        Path(args.out).write_text(dump(profile))
        print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
