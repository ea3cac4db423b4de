"""Roles, the set-up every parameter server starts from, on real ranks: servers 0 … S−1 and the
workers split the world; the servers' flat host buffers, joined in server order, are the model's
parameters exactly; each server's optimizer steps its buffer alone, a worker's its model; and a
world with no worker left is refused before any message."""

import numpy as np
import pytest
from device_helpers import host
from dp_helpers import make_task
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.optim import SGD
from scratchpar.parallel.ps.roles import Roles


class JustRoles(Roles):
    """Roles alone: the set-up, with no step of any variant."""

    def step(self, batch) -> dict:
        raise AssertionError("the roles' test takes no step")


@settings(max_examples=6)
@given(kind=st.sampled_from(("mlp", "gpt")), servers=st.integers(1, 3), seed=st.integers(0, 99))
@shared_verdict
def test_the_servers_hold_the_model_in_order_and_the_rest_work(comm, mesh, kind, servers,
                                                               seed):
    if comm.size < 2:
        pytest.skip("a parameter server needs a server and a worker")
    servers = min(servers, comm.size - 1)
    task = make_task(kind, seed)
    roles = JustRoles(task.model, lambda params: SGD(params, 0.1), task, mesh, servers=servers)
    try:
        server = comm.rank < servers
        assert (roles.is_server, roles.servers, roles.workers) == \
            (server, servers, comm.size - servers)
        assert roles.group.size == (servers if server else comm.size - servers)
        mine = [host(roles.flat.data)] if server else []
        held = comm.allgather_obj(mine)  # every server's buffer, in rank order
        assert roles.optimizer.params == ([roles.flat] if server else roles.params)
    finally:
        roles.close()
    whole = np.concatenate([p.reshape(-1) for p in map(host, (q.data for q in roles.params))])
    assert np.array_equal(np.concatenate([b for part in held for b in part]), whole)
    assert [len(part[0]) for part in held[:servers]] == roles.ranges.lengths


@shared_verdict
def test_a_world_with_no_worker_left_is_refused(comm, mesh):
    task = make_task("mlp", 0)
    with pytest.raises(ValueError, match=f"{comm.size} servers on {comm.size} ranks leave no "
                                         "worker"):
        JustRoles(task.model, lambda params: SGD(params, 0.1), task, mesh, servers=comm.size)
