"""One rank of a measurement's MPI job: ``python -m scratchpar.jobs.worker MODULE:FUNCTION
--config JSON --device D --out PATH``; rank 0 writes the function's JSON (jobs/mpijob.py)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from .. import backend
from ..allocator import keep_freed_memory
from ..comm.mpi import Communicator


def serve() -> int:
    """Keep freed memory with the process (so what a rank holds is measured, not the
    allocator's returns), join the world, select this rank's device, and have rank 0 write
    ``FUNCTION(comm, config)``; exit status 0."""
    parser = argparse.ArgumentParser(description="one rank of a scratchpar measurement's job")
    parser.add_argument("target", help="MODULE:FUNCTION, the measurement to run")
    parser.add_argument("--config", required=True, help="JSON: the part and its settings")
    parser.add_argument("--device", choices=backend.DEVICES, default="cpu")
    parser.add_argument("--out", required=True, help="rank 0 writes its JSON here")
    args = parser.parse_args()
    module, _, name = args.target.partition(":")
    measure = getattr(importlib.import_module(module), name)
    keep_freed_memory()
    comm = Communicator()
    backend.set_device(args.device, comm.local_rank, comm.local_size)
    result = measure(comm, json.loads(args.config))
    if comm.rank == 0:
        Path(args.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(serve())
