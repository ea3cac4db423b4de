"""NVIDIA's Multi-Process Service for the ranks of a node that share its GPUs.

Each rank holds a CUDA context of its own, and without MPS the GPU time-slices between their
processes: a staged message of 16 KiB or less waited about 150 µs for its copy to the host,
against 10–23 µs under MPS, which runs every rank's work in one context (docs/devices.md, "On
a GPU a fifth time"). A process joins MPS when it first initializes CUDA, if the control daemon
is running then (NVIDIA's MPS guide, §2.3; its pipe in ``CUDA_MPS_PIPE_DIRECTORY``). So where a
node's ranks outnumber its GPUs, its first rank starts the daemon (``nvidia-cuda-mps-control
-d``) before any rank touches CUDA, and the others wait for its pipe. ``SCRATCHPAR_MPS=off``
leaves MPS alone, and the first rank says what that costs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

CONTROL = "nvidia-cuda-mps-control"
WAIT = 10.0  # seconds a rank waits for the daemon's pipe


def pipe() -> str:
    """The control daemon's pipe, which is there while it runs."""
    return os.path.join(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), "control")


def visible() -> int | None:
    """The GPUs this process may use, counted without initializing CUDA (which would join it
    to no MPS): ``CUDA_VISIBLE_DEVICES`` where set, else the driver's list, else unknown."""
    chosen = os.environ.get("CUDA_VISIBLE_DEVICES")
    if chosen is not None:
        return len([d for d in chosen.split(",") if d.strip()])
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return None


def share(local_rank: int, local_size: int, count: int) -> str | None:
    """Before CUDA: MPS for ``local_size`` ranks on ``count`` GPUs, started by the node's first
    rank where needed and allowed. Returns what the first rank should print, or None."""
    if local_size <= count or os.path.exists(pipe()):
        return None
    if os.environ.get("SCRATCHPAR_MPS", "start") == "off" or shutil.which(CONTROL) is None:
        return note(local_size, count) if local_rank == 0 else None
    if local_rank == 0:
        subprocess.run([CONTROL, "-d"], capture_output=True, check=False)
    waited = time.monotonic() + WAIT
    while not os.path.exists(pipe()) and time.monotonic() < waited:
        time.sleep(0.05)
    if local_rank != 0:
        return None
    if not os.path.exists(pipe()):
        return note(local_size, count) + f" ({CONTROL} -d did not start it)"
    return (f"scratchpar: {sharing(local_size, count)}: started NVIDIA's MPS ({CONTROL} -d), "
            f"which runs their work in one context; it stays up after the job (stop it: echo "
            f"quit | {CONTROL})")


def sharing(local_size: int, count: int) -> str:
    return f"{local_size} ranks share {count} GPU{'s' if count > 1 else ''} on this node"


def note(local_size: int, count: int) -> str:
    """The first rank's line where ``local_size`` ranks share ``count`` GPUs without MPS."""
    return (f"scratchpar: {sharing(local_size, count)} without MPS; the GPU switches between "
            f"their processes, and a small message waits about 150 µs for it. Start MPS "
            f"first: {CONTROL} -d")
