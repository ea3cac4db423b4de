"""The MPI tier: these files run on every rank under ``mpiexec -n N python -m pytest tests/mpi``.

Every rank collects the same tests in the same order and calls collectives in lockstep.
Hypothesis is derandomized with no database, so every rank draws the same examples; a test
wrapped in ``mpi_helpers.shared_verdict`` fails on every rank when it fails on any, so all ranks
shrink alike. A rank stuck in a wait gives up after ``SCRATCHPAR_COMM_TIMEOUT`` (60 s here).
"""

import pytest
from hypothesis import HealthCheck, settings
from mpi_helpers import WORLD

from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator

settings.register_profile(
    "mpi", derandomize=True, database=None, deadline=None, max_examples=25,
    suppress_health_check=list(HealthCheck), print_blob=False,
)
settings.load_profile("mpi")

@pytest.fixture(scope="session")
def comm() -> Communicator:
    """The world communicator, shared by every test of the session."""
    return WORLD


@pytest.fixture(scope="session")
def mesh(comm):
    """Pure data parallelism over the world, ``Mesh(comm)``: the mesh of every strategy that
    gives each rank the whole model, made once (on every rank alike) and freed at the end."""
    made = Mesh(comm)
    yield made
    made.free()
