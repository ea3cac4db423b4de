"""Staging in one process (messages to oneself): device buffers cross through pinned memory,
each message holds its buffer until it completes, and host arrays go to MPI as they are."""

import numpy as np
import pytest
from device_helpers import host, on_device

from scratchpar.comm import collectives
from scratchpar.comm.mpi import Communicator
from scratchpar.double import watch

N = 1 << 17  # float64: 1 MiB, past MPI's eager limit


@pytest.fixture(scope="module")
def comm():
    return Communicator(name="self")


def test_messages_to_oneself_arrive_through_pinned_memory(comm, device):
    sent, got = on_device(np.arange(N, dtype=np.float64)), on_device(np.zeros(N))
    for _ in range(2):
        with watch() as seen:
            comm.sendrecv(sent, 0, got, 0)
            collectives.broadcast_(comm, got, algorithm="mpi")
        assert np.array_equal(host(got), np.arange(N))
        assert seen.pageable_copies == []
    assert seen.pinned_bytes == 0  # the second time, from the pool
    if device == "double":  # out for the send and the root's broadcast, in for the receive
        assert (seen.to_host_bytes, seen.to_device_bytes) == (2 * 8 * N, 8 * N)


def test_a_send_keeps_its_staging_buffer_until_it_completes(comm, device):
    first, second = on_device(np.full(N, 1.0)), on_device(np.full(N, 2.0))
    sends = [comm.isend(first, 0, tag=1), comm.isend(second, 0, tag=2)]  # neither received yet
    got = [on_device(np.zeros(N)) for _ in range(2)]
    comm.wait_all([comm.irecv(got[1], 0, tag=2), comm.irecv(got[0], 0, tag=1), *sends])
    assert np.array_equal(host(got[0]), np.full(N, 1.0))
    assert np.array_equal(host(got[1]), np.full(N, 2.0))


def test_host_arrays_go_to_mpi_as_they_are(comm):
    got = np.zeros(4)
    with watch() as seen:
        comm.sendrecv(np.arange(4.0), 0, got, 0)
    assert got.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert seen.to_host_bytes == seen.to_device_bytes == seen.pinned_bytes == 0
