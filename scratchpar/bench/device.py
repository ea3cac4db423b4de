"""The device a benchmark runs on: its ``--device`` flag, and the name every table header gives.

On a device, scratchpar's models, data and buffers live there, and every timed region ends by
waiting for the device (timing.py): a GPU runs kernels asynchronously, so a clock read without the
wait times the launch, not the work. ``double`` is CuPy's behaviour on the CPU (scratchpar/double):
it checks the GPU path of a benchmark on a machine with no GPU; its timings mean nothing.
"""

from __future__ import annotations

from .. import backend


def add_argument(parser) -> None:
    parser.add_argument("--device", choices=backend.DEVICES, default="cpu",
                        help="where scratchpar's arrays live: cpu (NumPy), cuda (CuPy), or double "
                             "(CuPy's rules on the CPU: checks the GPU path, times nothing real); "
                             "default cpu")


def describe(device: str) -> str:
    """The device as a table header names it: 'cuda (NVIDIA H100 80GB HBM3)', 'cpu (NumPy)'…"""
    if device == "cuda":
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]  # bytes in CuPy ≤ 13
        return f"cuda ({name.decode() if isinstance(name, bytes) else name}, CuPy)"
    if device == "double":
        return "double (CuPy's rules on the CPU: a check of the GPU path, not a GPU timing)"
    return "cpu (NumPy)"


def judged(device: str, verdict: str) -> str:
    """A target's verdict, or none on the double, whose timings measure nothing real."""
    return "n/a (double)" if device == "double" else verdict


def staging(device: str, cuda_aware: bool) -> str:
    """How device buffers reach MPI in this run (Communicator.cuda_aware), for the tables' notes."""
    if device == "cpu":
        return "host buffers: MPI reads them in place"
    if cuda_aware:
        return "MPI is CUDA-aware: it reads device buffers itself, after a stream sync"
    return ("MPI is not CUDA-aware: device buffers are staged through pinned host memory, "
            "by every contender alike")
