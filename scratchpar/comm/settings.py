"""What each MPI library needs to run here and to stay quiet, in one place (docs/mpi.md): the
launcher's settings, kept in ``launcher.env``, and the ranks' own, set before MPI starts.

MPI reads its settings from the environment once, at ``MPI_Init``, which mpi4py calls when
``mpi4py.MPI`` is first imported; so ``comm/__init__.py`` applies the ranks' defaults before any
module of this package imports it, and a user's own ``mpiexec … python -m scratchpar.train``
gets them too. A value the user set always wins.
"""

from __future__ import annotations

import os
from pathlib import Path

LAUNCHER_ENV = Path(__file__).with_name("launcher.env")
RDMA_DEVICES = Path("/sys/class/infiniband")  # InfiniBand and RoCE adapters, one entry each


def launcher_settings() -> dict[str, str]:
    """The ``export NAME=value`` lines of ``launcher.env``: what ``mpiexec`` itself reads."""
    settings = {}
    for line in LAUNCHER_ENV.read_text().splitlines():
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            settings[name] = value
    return settings


def rank_defaults() -> dict[str, str]:
    """What every rank sets unless the user did. Open MPI's one-sided component over UCX serves
    RDMA adapters; on a machine without one it declines every window, printing "OSC UCX
    component priority set inside component query failed" each time, before Open MPI takes
    the next component (osc sm within a node, osc rdma across nodes) as it would anyway. So
    where there is no adapter it is left out; where there is one it stays. MPICH and Intel MPI
    ignore the name."""
    if RDMA_DEVICES.is_dir() and any(RDMA_DEVICES.iterdir()):
        return {}
    return {"OMPI_MCA_osc": "^ucx"}


def apply_rank_defaults() -> None:
    """Put :func:`rank_defaults` into this process's environment, under the user's values."""
    for name, value in rank_defaults().items():
        os.environ.setdefault(name, value)
