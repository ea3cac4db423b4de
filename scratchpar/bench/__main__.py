"""The benchmark launcher: ``python -m scratchpar.bench <name> [options]``."""

from __future__ import annotations

import importlib
import os
import sys

if __name__ == "__main__":  # one thread per library, set before NumPy and PyTorch load
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

from ..jobs import harness  # noqa: E402

PACKAGES = {"step": "step", "collectives": "collectives", "dp": "dp", "pipeline": "pipeline",
            "branches": "branches", "tensor": "tensor", "ps": "ps", "async": "asynchronous",
            "zero": "zero", "memory": "memory", "plan": "plan",
            "context": "context", "experts": "experts"}  # the CLI's name → the subpackage
BENCHMARKS = {name: importlib.import_module(f"scratchpar.bench.{package}.driver").BENCHMARK
              for name, package in PACKAGES.items()}


def main(argv=None) -> int:
    return harness.main(BENCHMARKS, argv)


if __name__ == "__main__":
    sys.exit(main())
