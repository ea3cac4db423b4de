"""The sharded format: pieces round-trip bit for bit in any dtype, blocks read back from any
cut, and an index or a piece edited by hand (or by an attacker) is refused, never unpickled."""

import json

import numpy as np
import pytest

from scratchpar.autograd.precision import bfloat16
from scratchpar.parallel.pieces import Block, Piece, whole_pieces
from scratchpar.train import CheckpointError, load_checkpoint, open_checkpoint, sharded
from scratchpar.train.sharded import save_sharded


def state(seed=0):
    g = np.random.default_rng(seed)
    return {"model": {"w": g.standard_normal((6, 4)).astype(np.float32),
                      "h": g.standard_normal(5).astype(bfloat16())},
            "optim": {"m.0": g.standard_normal((6, 4)), "step_count": 3, "lr": 0.25}}


def save(path, seed=0, cut=None):
    """``state(seed)`` saved: whole pieces, or ``w`` and ``m.0`` cut as ``cut`` lists blocks."""
    pieces, scalars = whole_pieces(state(seed))
    if cut is not None:
        pieces = [q for p in pieces for q in
                  ([Piece(p.part, p.name, b, b.take(p.array)) for b in cut]
                   if p.array.shape == (6, 4) else [p])]
    save_sharded(path, pieces, scalars, {"step": 7, "config": {}})


def test_a_round_trip_is_bitwise_in_every_dtype(tmp_path):
    save(tmp_path / "ck")
    arrays, meta = load_checkpoint(tmp_path / "ck")
    assert meta["step"] == 7 and meta["optim"] == {"step_count": 3, "lr": 0.25}
    for part, named in state().items():
        for name, value in named.items():
            if hasattr(value, "shape"):
                assert arrays[part][name].dtype == value.dtype
                assert arrays[part][name].tobytes() == value.tobytes()
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["meta.json",
                                                                    "rank0.pieces.npz"]


def test_a_block_is_read_from_pieces_of_another_cut(tmp_path):
    save(tmp_path / "ck", cut=[Block.flat((6, 4), 0, 10), Block.flat((6, 4), 10, 24)])
    with open_checkpoint(tmp_path / "ck") as stored:
        rows = Block.cut((6, 4), (6, 4), 0, 2, 5)
        np.testing.assert_array_equal(stored.read("model", "w", rows), state()["model"]["w"][2:5])
        with pytest.raises(ValueError, match=r"the checkpoint's is \(6, 4\), this run's \(4, 6\)"):
            stored.read("model", "w", Block.full((4, 6)))


def edited(tmp_path, edit):
    save(tmp_path / "ck", cut=[Block.flat((6, 4), 0, 10), Block.flat((6, 4), 10, 24)])
    meta = json.loads((tmp_path / "ck" / "meta.json").read_text())
    edit(meta)
    (tmp_path / "ck" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(tmp_path / "ck")
    return str(err.value)


def first_piece(meta):
    return meta["arrays"]["model"]["w"]["pieces"][0]


@pytest.mark.parametrize("edit, reason", [
    (lambda m: first_piece(m).update(file="../../etc/passwd"), "is malformed: piece"),
    (lambda m: first_piece(m).update(offsets=[20]), "is not inside (24,)"),
    (lambda m: first_piece(m).update(shape=[-1]), "is not a list of sizes"),
    (lambda m: m["arrays"]["model"]["w"].update(dtype="object"), "dtype 'object'"),
    (lambda m: m["arrays"]["model"]["w"]["pieces"].pop(), "do not add up to its shape"),
    (lambda m: first_piece(m).update(sha256="0" * 64), "does not match its index entry"),
    (lambda m: m["arrays"]["model"]["w"].update(dtype="int8"), "its index int8"),
    (lambda m: first_piece(m).update(key="p9"), "holds no piece p9"),
    (lambda m: m.pop("arrays"), "has no index of its arrays"),
])
def test_an_index_edited_by_hand_is_refused(tmp_path, edit, reason):
    assert reason in edited(tmp_path, edit)


def test_a_piece_file_truncated_or_holding_objects_is_refused(tmp_path):
    save(tmp_path / "ck")
    path = tmp_path / "ck" / "rank0.pieces.npz"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(tmp_path / "ck")
    np.savez(path, **{f"p{i}": np.array([{"x": 1}] * 24, dtype=object).reshape(6, 4)
                      for i in range(4)})
    with pytest.raises(CheckpointError, match="its header says object"):
        load_checkpoint(tmp_path / "ck")


def test_a_new_save_replaces_the_old_one_whole(tmp_path):
    save(tmp_path / "ck", seed=0)
    save(tmp_path / "ck", seed=1, cut=[Block.full((6, 4))])
    arrays, _ = load_checkpoint(tmp_path / "ck")
    np.testing.assert_array_equal(arrays["model"]["w"], state(1)["model"]["w"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]


def test_a_save_killed_before_its_index_leaves_the_last_checkpoint(tmp_path, monkeypatch):
    """The pieces are written, the index never is: the last checkpoint still reads whole."""
    save(tmp_path / "ck", seed=0)

    def killed(path, obj):
        raise KeyboardInterrupt

    monkeypatch.setattr(sharded, "write_json", killed)
    with pytest.raises(KeyboardInterrupt):
        save(tmp_path / "ck", seed=1)
    arrays, meta = load_checkpoint(tmp_path / "ck")
    np.testing.assert_array_equal(arrays["model"]["w"], state(0)["model"]["w"])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ck.tmp-")]  # its pieces


def test_a_folder_the_writers_do_not_share_is_said_so(tmp_path, monkeypatch):
    """A rank whose file rank 0 cannot see (no shared filesystem) stops the save, naming why,
    before the index is written: the last checkpoint stays."""
    save(tmp_path / "ck", seed=0)
    elsewhere = sharded.write_pieces

    def on_another_node(path, name, pieces):
        return elsewhere(tmp_path / "node1.npz", name, pieces)

    monkeypatch.setattr(sharded, "write_pieces", on_another_node)
    with pytest.raises(RuntimeError, match="rank0.pieces.npz, written by other ranks, are not "
                                           "in .* a checkpoint in pieces needs a --save folder "
                                           "that every rank sees"):
        save(tmp_path / "ck", seed=1)
    np.testing.assert_array_equal(load_checkpoint(tmp_path / "ck")[0]["model"]["w"],
                                  state(0)["model"]["w"])
