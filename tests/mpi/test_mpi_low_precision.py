"""16-bit buffers on the wire: fp16 and bf16 (which MPI does not name) all-reduced by every
hand-written algorithm exactly, and MPI's own reduction refusing bf16 by name, on every rank."""

import numpy as np
import pytest
from device_helpers import host, on_device
from mpi_helpers import shared_verdict

from scratchpar import backend
from scratchpar.autograd.precision import bfloat16
from scratchpar.comm import choice, collectives
from scratchpar.comm.errors import CommError


def low_dtypes():
    return [np.dtype(np.float16)] + ([bfloat16()] if backend.xp_default() is np else [])


@pytest.mark.parametrize("algorithm", choice.ALGORITHMS["all_reduce"])
@shared_verdict
def test_16_bit_sums_of_small_integers_are_exact_in_every_algorithm(comm, algorithm):
    """Integers up to 2⁸ and their sums over a few ranks are exact in both formats, so every
    order of addition gives the same bits."""
    for dtype in low_dtypes():
        if algorithm == "mpi" and dtype.name == "bfloat16":
            continue
        for n in (0, 1, 5, 1000):
            mine = np.arange(n) % 7 + comm.rank  # (n,)
            buf = on_device(mine, dtype)
            collectives.all_reduce_(comm, buf, algorithm=algorithm)
            want = sum(np.arange(n) % 7 + r for r in range(comm.size))
            assert host(buf).dtype == dtype
            np.testing.assert_array_equal(host(buf).astype(np.float64), want)


@shared_verdict
def test_mpi_own_reduction_refuses_bf16_by_name(comm):
    if backend.xp_default() is not np:
        return
    buf = np.ones(4, bfloat16())
    with pytest.raises(CommError, match="MPI's own reductions cannot add bfloat16"):
        collectives.all_reduce_(comm, buf, algorithm="mpi")
