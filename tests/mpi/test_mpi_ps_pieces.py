"""A parameter server's sharded checkpoint: each server writes its key range of the parameters
and of Adam's moments and nothing more, a worker writes nothing, the pieces hold the state rank
0 would have gathered, bit for bit, and servers of another number read them back to it."""

import numpy as np
import pytest
from device_helpers import host
from dp_helpers import everywhere, make_batch, make_task

from scratchpar.optim import Adam
from scratchpar.parallel.ps.sync import SyncParameterServer
from scratchpar.train.sharded import save_sharded
from scratchpar.train.stored import open_checkpoint


def server(comm, mesh, servers: int, seed: int):
    task = make_task("gpt", seed)
    return SyncParameterServer(task.model, lambda p: Adam(p, lr=0.01), task, mesh,
                               servers=servers)


def as_bytes(state: dict) -> dict:
    return {f"{part}/{k}": host(v).tobytes() if hasattr(v, "shape") else v
            for part, named in state.items() for k, v in named.items()}


def test_servers_write_their_ranges_and_any_split_reads_them(comm, mesh, tmp_path):
    if comm.size < 2:
        pytest.skip("a parameter server needs a server and a worker")
    servers = 2 if comm.size > 2 else 1
    ps = server(comm, mesh, servers, seed=5)
    for step in range(2):
        ps.step(make_batch("gpt", comm.size + step, 7 + step))
    pieces, _ = ps.pieces()
    written = sum(p.array.nbytes for p in pieces)
    # a server: its range of the parameters and of Adam's two moments; a worker: nothing
    share = 3 * ps.flat.data.itemsize * ps.ranges.lengths[comm.rank] if ps.is_server else 0
    whole = everywhere(comm, ps.state_dict())
    directory = comm.allgather_obj(str(tmp_path / "ck"))[0]
    save_sharded(directory, *ps.pieces(), {"step": 2}, comm)
    ps.close()
    with open_checkpoint(directory) as stored:
        read = as_bytes(stored.state())
    other = server(comm, mesh, 3 - servers if comm.size > 3 else 1, seed=9)  # other weights
    with open_checkpoint(directory) as stored:
        other.load_pieces(stored)
    resumed = everywhere(comm, other.state_dict())
    assert written == share and (share > 0) == ps.is_server
    assert read == as_bytes(whole) == as_bytes(resumed)
    if not other.is_server:  # a worker holds the whole parameters, read whole
        for name, p in other.model.named_parameters():
            np.testing.assert_array_equal(host(p.data), host(whole["model"][name]).astype(p.dtype))
    other.close()
