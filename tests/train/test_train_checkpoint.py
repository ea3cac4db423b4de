"""Checkpoints: bitwise round trip, atomic replacement, and hostile files refused."""

import json

import numpy as np
import pytest

from scratchpar.train import CheckpointError, load_checkpoint, save_checkpoint


def arrays(seed=0):
    g = np.random.default_rng(seed)
    return {"model": {"w": g.standard_normal((3, 4)).astype(np.float32),
                      "b": g.standard_normal(5)},
            "optim": {"exp_avg.0": g.standard_normal((3, 4)), "ids": np.arange(4)}}


def test_round_trip_is_bitwise(tmp_path):
    saved = arrays()
    meta = {"step": 7, "rng": {"state": 2**100 + 3}}
    save_checkpoint(tmp_path / "ck", saved, meta)
    loaded, loaded_meta = load_checkpoint(tmp_path / "ck")
    assert loaded_meta["step"] == 7 and loaded_meta["rng"] == meta["rng"]
    for stem, named in saved.items():
        assert loaded[stem].keys() == named.keys()
        for k, v in named.items():
            assert loaded[stem][k].dtype == v.dtype
            assert loaded[stem][k].tobytes() == v.tobytes()


def test_overwrite_replaces_whole_checkpoint_and_leaves_no_temporaries(tmp_path):
    save_checkpoint(tmp_path / "ck", arrays(0), {"step": 1})
    save_checkpoint(tmp_path / "ck", arrays(1), {"step": 2})
    loaded, meta = load_checkpoint(tmp_path / "ck")
    assert meta["step"] == 2
    np.testing.assert_array_equal(loaded["model"]["w"], arrays(1)["model"]["w"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]


def _rewrite_with_digest(path, npz_writer):
    """Replace model.npz by npz_writer's file and fix its checksum, as an attacker would."""
    import hashlib

    npz_writer(path / "model.npz")
    meta = json.loads((path / "meta.json").read_text())
    meta["sha256"]["model"] = hashlib.sha256((path / "model.npz").read_bytes()).hexdigest()
    (path / "meta.json").write_text(json.dumps(meta))


def test_object_array_is_refused(tmp_path):
    save_checkpoint(tmp_path / "ck", arrays(), {"step": 1})
    evil = np.array([{"payload": 1}, None], dtype=object)
    _rewrite_with_digest(tmp_path / "ck", lambda p: np.savez(p, w=evil))
    with pytest.raises(CheckpointError, match="object array"):
        load_checkpoint(tmp_path / "ck")


def test_truncated_file_is_refused(tmp_path):
    save_checkpoint(tmp_path / "ck", arrays(), {"step": 1})
    data = (tmp_path / "ck" / "optim.npz").read_bytes()
    (tmp_path / "ck" / "optim.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or modified"):
        load_checkpoint(tmp_path / "ck")


def test_truncated_file_with_matching_checksum_is_refused(tmp_path):
    save_checkpoint(tmp_path / "ck", arrays(), {"step": 1})
    data = (tmp_path / "ck" / "model.npz").read_bytes()
    _rewrite_with_digest(tmp_path / "ck", lambda p: p.write_bytes(data[: len(data) // 2]))
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(tmp_path / "ck")


def test_missing_or_corrupt_metadata_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        load_checkpoint(tmp_path)
    save_checkpoint(tmp_path / "ck", arrays(), {"step": 1})
    (tmp_path / "ck" / "meta.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(tmp_path / "ck")
