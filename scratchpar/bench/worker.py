"""A benchmark's MPI worker: its JSON config in, rank 0's JSON result out (bench/mpijob.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import backend
from ..allocator import keep_freed_memory
from ..comm.mpi import Communicator


def serve(measure) -> int:
    """Parse ``--config JSON --device D --out PATH``, keep freed memory with the process (so
    what a rank holds is measured, not the allocator's returns), join the world, select this
    rank's device, and have rank 0 write ``measure(comm, config)``; exit status 0."""
    parser = argparse.ArgumentParser(description="one rank of a scratchpar benchmark's job")
    parser.add_argument("--config", required=True, help="JSON: the part and its settings")
    parser.add_argument("--device", choices=backend.DEVICES, default="cpu")
    parser.add_argument("--out", required=True, help="rank 0 writes its JSON here")
    args = parser.parse_args()
    keep_freed_memory()
    comm = Communicator()
    backend.set_device(args.device, comm.local_rank)
    result = measure(comm, json.loads(args.config))
    if comm.rank == 0:
        Path(args.out).write_text(json.dumps(result))
    return 0
