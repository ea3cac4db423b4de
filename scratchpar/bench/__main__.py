"""The benchmark launcher: ``python -m scratchpar.bench <name> [options]``."""

from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__":  # one thread per library, set before NumPy and PyTorch load
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

from . import asynchronous, branches, collectives, dp, pipeline, ps, step, tensor, zero  # noqa: E402

# name → module with add_arguments(parser) and run(args) -> exit code ("async" is a keyword, so
# its module is asynchronous.py)
BENCHMARKS = {"step": step, "collectives": collectives, "dp": dp, "pipeline": pipeline,
              "branches": branches, "tensor": tensor, "ps": ps, "async": asynchronous,
              "zero": zero}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scratchpar.bench",
                                     description="Run one of scratchpar's benchmarks.")
    names = parser.add_subparsers(dest="name", metavar="<name>", required=True,
                                  help=f"one of: {', '.join(BENCHMARKS)}")
    for name, module in BENCHMARKS.items():
        module.add_arguments(names.add_parser(name, help=module.__doc__.splitlines()[0],
                                              description=module.__doc__))
    args = parser.parse_args(argv)
    return BENCHMARKS[args.name].run(args)


if __name__ == "__main__":
    sys.exit(main())
