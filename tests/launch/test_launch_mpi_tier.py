"""The MPI tier (tests/mpi) on 1, 2, 3 and 4 real ranks, each run a separate mpiexec job; every
job runs each test on the CPU and on the device double (tests/conftest.py), which adds about a
third to the tier's time: a device mistake can hide at any world size (the fold of 3 ranks,
the pairs of 4)."""

import pytest
from launch_helpers import run_mpi


@pytest.mark.timeout(660)  # the job's own limit, 600 s, and a minute to report it
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_mpi_tier(n):
    result = run_mpi(n, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/mpi"],
                     timeout=600, env={"SCRATCHPAR_MPI_TIER": "1"})
    assert result.returncode == 0, f"tests/mpi failed on {n} ranks:\n{result.stdout[-6000:]}\n" \
                                   f"{result.stderr[-3000:]}"
