"""Sharded checkpoints among real ranks: each rank writes its own share and no more, any
strategy reads what another wrote, and a run resumed from one continues bit for bit."""

import itertools
from pathlib import Path

import numpy as np
import pipeline_helpers
import pytest
from device_helpers import host
from dp_helpers import everywhere, make_batch, make_task
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from pipeline_helpers import make_hybrid

from scratchpar.comm.mesh import factorizations
from scratchpar.optim import Adam
from scratchpar.parallel.dp import DataParallel
from scratchpar.parallel.zero.stage1 import ZeRO1
from scratchpar.parallel.zero.stage3 import ZeRO3
from scratchpar.train.paths import unshared_save
from scratchpar.train.sharded import save_sharded
from scratchpar.train.stored import open_checkpoint

KINDS = {"dp": DataParallel, "zero1": ZeRO1, "zero3": ZeRO3}


def build(kind, mesh, seed=11):
    task = make_task("gpt", seed)
    return KINDS[kind](task.model, lambda params: Adam(params, lr=0.01), task, mesh,
                       bucket_bytes=256, grad_clip=0.5)


def trained(kind, mesh, steps=2):
    strategy = build(kind, mesh)
    for step in range(steps):
        strategy.step(make_batch("gpt", 6, step))
    return strategy


def saved(strategy, comm, tmp_path) -> str:
    directory = comm.allgather_obj(str(tmp_path / "ck"))[0]
    save_sharded(directory, *strategy.pieces(), {"step": 2}, comm)
    return directory


def as_bytes(state: dict) -> dict:
    return {f"{part}/{k}": host(v).tobytes() if hasattr(v, "shape") else v
            for part, named in state.items() for k, v in named.items()}


def test_a_zero_rank_writes_its_chunks_and_a_replica_its_share(comm, mesh, tmp_path):
    for kind in KINDS:
        strategy = trained(kind, mesh)
        pieces, _ = strategy.pieces()
        mine = sum(host(p.array).nbytes for p in pieces)
        whole = everywhere(comm, strategy.state_dict())
        total = sum(host(v).nbytes for named in whole.values() for v in named.values()
                    if hasattr(v, "shape"))
        assert sum(comm.allgather_obj(mine)) == total  # every element once
        if kind != "dp":  # a chunk of every group: the parameters' and Adam's two moments'
            chunk = sum(g.mine.size for g in strategy.groups)
            assert mine == chunk * 8 * 3
        assert max(comm.allgather_obj(mine)) <= total // comm.size + max(
            host(v).nbytes for v in whole["model"].values()) * 3


@pytest.mark.parametrize("wrote, reads", list(itertools.product(KINDS, KINDS)))
def test_any_strategy_resumes_what_another_wrote_bit_for_bit(comm, mesh, tmp_path, wrote, reads):
    writer = trained(wrote, mesh)
    directory = saved(writer, comm, tmp_path)
    reader = build(reads, mesh, seed=99)  # other weights: all of them must come from the file
    with open_checkpoint(directory) as stored:
        reader.load_pieces(stored)
    assert as_bytes(everywhere(comm, reader.state_dict())) == \
        as_bytes(everywhere(comm, writer.state_dict()))
    for strategy in (writer, reader):
        strategy.step(make_batch("gpt", 6, 2))
    after = [as_bytes(everywhere(comm, s.state_dict())) for s in (writer, reader)]
    if KINDS[wrote] is KINDS[reads]:
        assert after[0] == after[1]
    else:  # another stage sums the gradient in another order: equal to rounding
        for key, value in after[0].items():
            if isinstance(value, bytes):
                np.testing.assert_allclose(np.frombuffer(after[1][key]), np.frombuffer(value),
                                           rtol=1e-12, atol=1e-12)


@settings(max_examples=6)
@given(data=st.data(), kind=st.sampled_from(["gpt", "mlp"]))
@shared_verdict
def test_a_hybrid_writes_each_element_once_and_any_mesh_reads_it_back(comm, tmp_path_factory,
                                                                        data, kind):
    """Saved in pieces at one (dp, pp, tp), read at another: the state is the saver's, bit for
    bit, and the ranks' pieces hold each element of it once."""
    first = data.draw(st.sampled_from(factorizations(comm.size)), label="saved at")
    second = data.draw(st.sampled_from(factorizations(comm.size)), label="resumed at")
    pipe = make_hybrid(comm, pipeline_helpers.make_task(kind, 5), "1f1b", *first, 2, adam=True)
    for step in range(2):
        pipe.step(pipeline_helpers.make_batch(kind, first[0] * 2 + 1, step))
    want = as_bytes(everywhere(comm, pipe.state_dict()))
    pieces, _ = pipe.pieces()
    written = sum(comm.allgather_obj(sum(host(p.array).nbytes for p in pieces)))
    assert written == sum(len(v) for v in want.values() if isinstance(v, bytes))
    directory = comm.allgather_obj(str(tmp_path_factory.mktemp("ck")))[0]
    save_sharded(directory, pieces, pipe.pieces()[1], {"step": 2}, comm)
    resumed = make_hybrid(comm, pipeline_helpers.make_task(kind, 6), "gpipe", *second, 2,
                          adam=True)
    with open_checkpoint(directory) as stored:
        resumed.load_pieces(stored)
    assert as_bytes(everywhere(comm, resumed.state_dict())) == want


def test_a_save_folder_some_rank_cannot_see_is_named_before_training(comm, tmp_path,
                                                                     monkeypatch):
    save = comm.allgather_obj(str(tmp_path / "ck"))[0]
    assert unshared_save(comm, save) == []
    assert comm.rank != 0 or not list(Path(save).parent.glob(".ck.probe-*"))  # rank 0's, gone
    if comm.size == 1:
        return
    if comm.rank == comm.size - 1:  # as if on a node without the filesystem
        monkeypatch.setattr(Path, "is_file", lambda self: False)
    found = unshared_save(comm, save)
    monkeypatch.undo()
    if comm.rank == 0:
        assert found == [f"--save {save}: rank {comm.size - 1} of {comm.size} cannot see the "
                         "folder rank 0 writes in; each rank writes its own part of a "
                         "checkpoint there, so it must be one that every rank sees (on a "
                         "cluster, a shared filesystem)"]
    else:
        assert found == []
