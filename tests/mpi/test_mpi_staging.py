"""Device buffers and MPI on real ranks, on the device double: staged through pooled pinned memory
where the library is not CUDA-aware, handed over directly (after a sync) where it is, and a
wrong claim of CUDA-awareness fails on every rank with an error that names the claim."""

import numpy as np
import pytest
from device_helpers import host, on_device
from mpi_helpers import shared_verdict

from scratchpar.comm import choice, collectives
from scratchpar.comm.errors import CommError
from scratchpar.comm.mpi import Communicator
from scratchpar.double import MPIReads, watch

N = 40_000  # float64: 320 KB, past MPI's eager limit
SMALL = 1_000  # float64: 8 KB, an all-reduce that latency decides


@pytest.fixture(autouse=True)
def double_only(device):
    if device != "double":
        pytest.skip("the device double checks what MPI is handed")


@pytest.fixture
def mpi_reads_device():
    """The simulated MPI library reads device memory (a CUDA-aware build) during the test."""
    MPIReads.device = True
    yield
    MPIReads.device = False


def rank_data(rank: int, salt: int = 0):
    return np.arange(N, dtype=np.float64) * (rank + 1) + salt  # (N,), on the host


def exercise(comm, salt: int):
    """A ring shift and every all-reduce algorithm on device arrays, checked on the host; what
    the double saw during the communication alone (the test's own copies left out)."""
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    got = on_device(np.empty(N))
    mine = on_device(rank_data(comm.rank, salt))
    want = sum(rank_data(r, salt) for r in range(comm.size))
    with watch() as seen:
        comm.sendrecv(mine * 1.0, right, got, left)  # * 1.0: work still queued on the stream
        totals = [collectives.all_reduce(comm, mine * 1.0, algorithm=algorithm)
                  for algorithm in choice.ALGORITHMS["all_reduce"]]
    assert np.array_equal(host(got), rank_data(left, salt))
    for total in totals:
        np.testing.assert_allclose(host(total), want, rtol=1e-12)
    return seen


@shared_verdict
def test_without_cuda_aware_mpi_messages_go_through_pooled_pinned_memory(comm):
    staged = comm.dup(name="staged")
    assert not staged.cuda_aware  # detected: the MPI library here does not read device memory
    seen = [exercise(staged, salt) for salt in range(3)]
    for step in seen:
        assert step.pageable_copies == [], "staging copied through pageable memory"
    assert [s.pinned_bytes for s in seen[1:]] == [0, 0], "the pinned pool grew call after call"
    if comm.size > 1:
        assert seen[0].to_host_bytes > 0  # staged through the host indeed


@shared_verdict
def test_a_small_all_reduce_goes_to_the_host_once_with_the_hosts_bits(comm):
    staged = comm.dup(name="once")
    for algorithm in ("auto", "ring", "recursive_doubling", "tree"):
        for start in (False, True):
            want = collectives.all_reduce(comm, rank_data(comm.rank)[:SMALL], algorithm=algorithm)
            x = on_device(rank_data(comm.rank)[:SMALL]) * 1.0  # work still queued on the stream
            with watch() as seen:
                if start:
                    collectives.all_reduce_start(staged, x, algorithm=algorithm).wait()
                else:
                    collectives.all_reduce_(staged, x, algorithm=algorithm)
            assert np.array_equal(host(x), want), f"{algorithm}: not the host's bits"
            if comm.size > 1:  # one copy each way, whatever p and however many steps
                assert seen.to_host_bytes == seen.to_device_bytes == SMALL * 8, algorithm
                assert seen.copies == 2, (algorithm, seen.copies)
                assert seen.pageable_copies == []


@shared_verdict
def test_a_cuda_aware_library_reads_device_buffers_after_a_sync(comm, mpi_reads_device):
    aware = Communicator(cuda_aware=True, name="aware")
    seen = exercise(aware, 0)  # the double raises if MPI reads a buffer before a sync
    assert seen.to_host_bytes == seen.to_device_bytes == seen.pinned_bytes == 0  # no staging
    assert any(s.startswith("synchronize at ") for s in seen.syncs)  # before each message


@shared_verdict
def test_a_wrong_cuda_aware_claim_fails_on_every_rank_naming_the_claim(comm):
    claims = Communicator(cuda_aware=True, name="claims", timeout=10.0)
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    mine, got = on_device(rank_data(comm.rank)), on_device(np.empty(N))
    with pytest.raises(CommError, match=r"cuda_aware=True\) says that the MPI library is "
                                        r"CUDA-aware.*SCRATCHPAR_CUDA_AWARE=0 or") as caught:
        claims.sendrecv(mine, right, got, left)  # the receive, posted first, fails on every rank
    assert "cannot read device memory" in str(caught.value)  # MPI's (the double's) own words
    for algorithm in ("ring", "mpi") if comm.size > 1 else ("mpi",):  # one rank: no ring
        with pytest.raises(CommError, match="MPI refused a device buffer"):
            collectives.all_reduce(claims, mine, algorithm=algorithm)
    total = collectives.all_reduce(comm, mine)  # nothing was left posted: the world goes on
    np.testing.assert_allclose(host(total), sum(rank_data(r) for r in range(comm.size)))
