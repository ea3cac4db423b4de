"""The Communicator's point-to-point messages and structure (split, dup, barrier) on real ranks.

Messages travel on the test's device; what arrived is compared on the host."""

import socket
import time

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes
from mpi_helpers import one_node, shared_verdict

from scratchpar.comm import collectives
from scratchpar.comm.errors import CommError

BIG = (512, 257)  # float64: 1.004 MiB, past MPI's eager limit, so a send waits for its receive


def payload(rank: int, shape=BIG, dtype="float64", salt: int = 0):
    """What ``rank`` sends: distinct per rank and per element, the same wherever it is built
    (on the host: ``on_device`` moves it)."""
    n = int(np.prod(shape))
    return ((np.arange(n) % 1000) + 1000 * rank + 100_000 * salt).astype(dtype).reshape(shape)


def empty(shape, dtype="float64"):
    return on_device(np.empty(shape, dtype))


def full(shape, value, dtype="float64"):
    return on_device(np.full(shape, value, dtype))


def neighbours(comm):
    return (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size


@shared_verdict
@pytest.mark.parametrize("calls", [("send", "recv"), ("mpi_send", "mpi_recv")])
def test_blocking_send_recv_around_the_ring_in_both_directions(comm, calls):
    """The Communicator's blocking calls, and MPI's own that benchmarks set beside them."""
    if comm.size == 1:
        pytest.skip("a blocking send to oneself waits forever for a large message")
    send, recv = (getattr(comm, name) for name in calls)
    right, left = neighbours(comm)
    for salt, (to, frm) in enumerate([(right, left), (left, right)]):
        for shape in (BIG, (1,)):  # past MPI's eager limit, and a message's fixed cost alone
            got, mine = empty(shape), on_device(payload(comm.rank, shape, salt=salt))
            if comm.rank % 2 == 0:  # even ranks send first, odd ranks receive first: no cycle
                send(mine, to)
                recv(got, frm)
            else:
                recv(got, frm)
                send(mine, to)
            assert np.array_equal(host(got), payload(frm, shape, salt=salt))


@shared_verdict
def test_isend_irecv_around_the_ring_in_both_directions(comm):
    right, left = neighbours(comm)
    from_left, from_right = empty(BIG), empty(BIG)
    out_right, out_left = (on_device(payload(comm.rank, salt=s)) for s in (1, 2))
    comm.wait_all([comm.irecv(from_left, left, tag=1), comm.irecv(from_right, right, tag=2),
                   comm.isend(out_right, right, tag=1), comm.isend(out_left, left, tag=2)])
    assert np.array_equal(host(from_left), payload(left, salt=1))
    assert np.array_equal(host(from_right), payload(right, salt=2))


@shared_verdict
def test_wait_any_serves_clients_in_arrival_order(comm):
    """Rank 0 posts one receive per other rank and serves whichever arrives first: the ranks
    send one after another, highest first (each waits for rank 0's reply to the one before),
    so rank 0 must see them in that order, and every message whole."""
    clients = list(range(comm.size - 1, 0, -1))  # the order they send in
    if comm.rank == 0:
        boxes = {r: empty((3, 4)) for r in clients}
        requests = [comm.irecv(boxes[r], r, tag=5) for r in range(1, comm.size)]
        served = []
        for _ in clients:
            r = 1 + comm.wait_any(requests)
            served.append(r)
            comm.send(full((1,), r), r, tag=6)  # the turn passes to the next client
        seen = {r: host(boxes[r]) for r in clients}
    else:
        turn = clients.index(comm.rank)
        if turn > 0:  # wait until the client before this one was served
            comm.recv(empty((1,)), clients[turn - 1], tag=7)
        comm.send(on_device(payload(comm.rank, (3, 4))), 0, tag=5)
        comm.recv(empty((1,)), 0, tag=6)
        if turn + 1 < len(clients):
            comm.send(full((1,), 0), clients[turn + 1], tag=7)
    if comm.rank == 0:
        assert served == clients
        for r in clients:
            assert np.array_equal(seen[r], payload(r, (3, 4)))
        with pytest.raises(ValueError, match="at least one request"):
            comm.wait_any(requests)  # every one already served


@shared_verdict
def test_sendrecv_shifts_the_ring_both_ways(comm):
    right, left = neighbours(comm)
    got = empty(BIG)
    comm.sendrecv(on_device(payload(comm.rank)), right, got, left)
    assert np.array_equal(host(got), payload(left))
    comm.sendrecv(on_device(payload(comm.rank, salt=1)), left, got, right)
    assert np.array_equal(host(got), payload(right, salt=1))


@given(shape=array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
       dtype=st.sampled_from(["int32", "int64", "float32", "float64"]))
@shared_verdict
def test_messages_of_any_shape_and_dtype_arrive_whole(comm, shape, dtype):
    right, left = neighbours(comm)
    got = full(shape, -7, dtype)
    comm.sendrecv(on_device(payload(comm.rank, shape, dtype)), right, got, left)
    assert got.dtype == dtype and got.shape == shape
    assert np.array_equal(host(got), payload(left, shape, dtype))


@shared_verdict
def test_empty_messages_complete(comm):
    right, left = neighbours(comm)
    got = empty((0, 3), np.int64)
    comm.wait_all([comm.irecv(got, left, tag=5), comm.isend(empty((0, 3), np.int64), right,
                                                           tag=5)])
    assert got.shape == (0, 3)


@shared_verdict
def test_user_messages_never_match_a_collectives_messages(comm):
    right, left = neighbours(comm)
    for tag in (1, 2, 3):  # a new channel numbers its collectives from 1: the same tags
        fresh = comm.dup()
        got = empty(5)
        pending = fresh.irecv(got, left, tag)  # posted before the collective's own receives
        total = collectives.all_reduce(fresh, full(5, comm.rank + 1.0), algorithm="ring")
        fresh.wait_all([pending, fresh.isend(full(5, -1.0 - comm.rank), right, tag)])
        assert np.array_equal(host(total), np.full(5, comm.size * (comm.size + 1) / 2))
        assert np.array_equal(host(got), np.full(5, -1.0 - left))


@shared_verdict
def test_some_ranks_talking_does_not_desynchronize_later_collectives(comm):
    talk = comm.dup()
    talk.timeout = 5.0  # a collective whose ranks disagree on its tag fails fast
    if talk.rank == 0:  # a message to itself, while the other ranks send nothing
        got = empty(2)
        talk.sendrecv(full(2, 1.0), 0, got, 0)
        assert np.array_equal(host(got), np.ones(2))
    total = collectives.all_reduce(talk, full(2, 1.0), algorithm="recursive_doubling")
    assert np.array_equal(host(total), np.full(2, float(comm.size)))


@shared_verdict
def test_split_by_parity_makes_working_sub_communicators(comm):
    color = comm.rank % 2
    sub = comm.split(color)
    members = [r for r in range(comm.size) if r % 2 == color]
    assert (sub.rank, sub.size) == (members.index(comm.rank), len(members))
    total = collectives.all_reduce(sub, full(1, comm.rank, np.int64), algorithm="ring")
    assert host(total).tolist() == [sum(members)]
    reverse = comm.split(color, key=-comm.rank)
    assert reverse.rank == len(members) - 1 - members.index(comm.rank)


@shared_verdict
def test_a_dup_is_a_separate_channel(comm):
    dup = comm.dup()
    assert (dup.rank, dup.size) == (comm.rank, comm.size)
    right, left = neighbours(comm)
    on_world, on_dup = empty(3), empty(3)
    world_recv = comm.irecv(on_world, left)  # posted first: it would take the dup's message
    dup_recv = dup.irecv(on_dup, left)
    dup.wait_all([dup.isend(full(3, 2.0), right), dup_recv])
    comm.wait_all([comm.isend(full(3, 1.0), right), world_recv])
    assert host(on_world).tolist() == [1.0] * 3 and host(on_dup).tolist() == [2.0] * 3


@shared_verdict
def test_barrier_holds_every_rank_until_the_last_arrives(comm):
    if comm.rank == 0:
        time.sleep(0.2)
    arrived = time.time()  # rank 0's arrival is the latest
    comm.barrier()
    left = time.time()
    times = comm.allgather_obj((arrived, left))
    assert min(t_left for _, t_left in times) >= times[0][0]


@pytest.mark.parametrize("peer", ["size", -1])
def test_a_peer_outside_the_world_is_refused(comm, peer):
    peer = comm.size if peer == "size" else peer
    buf = full(2, 0.0)
    for post in (comm.isend, comm.irecv, comm.send, comm.recv):
        with pytest.raises(CommError, match=f"peer rank {peer} is outside"):
            post(buf, peer)


@one_node  # where MPI puts the ranks of one host on nodes of their own, hosts are not nodes
def test_local_ranks_number_each_node_from_zero(comm):
    hosts = comm.allgather_obj((socket.gethostname(), comm.local_rank))
    assert 0 <= comm.local_rank < comm.size
    for node in {h for h, _ in hosts}:
        local = sorted(lr for h, lr in hosts if h == node)
        assert local == list(range(len(local)))
