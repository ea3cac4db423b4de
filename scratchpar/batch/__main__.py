"""The batch-size measurements: ``python -m scratchpar.batch <name> [options]``, each a table
and a figure, run by the benchmarks' harness."""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # one thread per library, set before NumPy loads
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

from ..allocator import keep_freed_memory  # noqa: E402
from ..jobs import harness  # noqa: E402
from .commands import COMMANDS  # noqa: E402


def main(argv=None) -> int:
    keep_freed_memory()  # the training command's allocator: its steps are what is measured
    return harness.main(COMMANDS, argv, prog="python -m scratchpar.batch",
                        description="Measure what the batch size does to training.")


if __name__ == "__main__":
    sys.exit(main())
