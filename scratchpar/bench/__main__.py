"""The benchmark launcher: ``python -m scratchpar.bench <name> [options]``."""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # one thread per library, set before NumPy and PyTorch load
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

from . import harness  # noqa: E402
from .asynchronous import driver as asynchronous  # noqa: E402
from .branches import driver as branches  # noqa: E402
from .collectives import driver as collectives  # noqa: E402
from .dp import driver as dp  # noqa: E402
from .pipeline import driver as pipeline  # noqa: E402
from .ps import driver as ps  # noqa: E402
from .step import driver as step  # noqa: E402
from .tensor import driver as tensor  # noqa: E402
from .zero import driver as zero  # noqa: E402

BENCHMARKS = {"step": step.BENCHMARK, "collectives": collectives.BENCHMARK, "dp": dp.BENCHMARK,
              "pipeline": pipeline.BENCHMARK, "branches": branches.BENCHMARK,
              "tensor": tensor.BENCHMARK, "ps": ps.BENCHMARK, "async": asynchronous.BENCHMARK,
              "zero": zero.BENCHMARK}


def main(argv=None) -> int:
    return harness.main(BENCHMARKS, argv)


if __name__ == "__main__":
    sys.exit(main())
