"""The start of a benchmark's MPI worker that reads one JSON config: its arguments, the world,
and its device."""

from __future__ import annotations

import argparse
import json

from scratchpar import backend
from scratchpar.allocator import keep_freed_memory
from scratchpar.comm.mpi import Communicator


def start(description: str, config_help: str, argv=None):
    """Parse ``--config JSON --device D --out PATH``, keep freed memory with the process (so
    what a rank holds is measured, not the allocator's returns), join the world and select this
    rank's device: ``(args, comm, config)``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", required=True, help=f"JSON: {config_help}")
    parser.add_argument("--device", choices=backend.DEVICES, default="cpu")
    parser.add_argument("--out", required=True, help="rank 0 writes its JSON here")
    args = parser.parse_args(argv)
    keep_freed_memory()
    comm = Communicator()
    backend.set_device(args.device, comm.local_rank)
    return args, comm, json.loads(args.config)
