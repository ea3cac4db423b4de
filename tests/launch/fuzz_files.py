"""The fuzzer's files: each case's directory of good and hostile inputs, the checkpoints prepared
once per session by real runs, and the ways a copy of one is corrupted."""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import zipfile
from pathlib import Path

import numpy as np

from scratchpar.train.sharded import digest

TINY = ("--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--seq-len", "12",
        "--vocab-size", "10", "--order", "1", "--steps", "6", "--warmup", "1", "--batch-size", "4",
        "--eval-batches", "1", "--log-every", "1", "--no-progress")
LSTM = (*TINY, "--model", "lstm", "--d-hidden", "8")
MLP = (*TINY, "--model", "mlp", "--source", "classification", "--n-features", "8",
       "--n-classes", "3", "--hidden-sizes", "8")
LOCAL_SGD = (*TINY, "--strategy", "local-sgd", "--local-sgd-every", "4")
LOGREG = (*TINY, "--source", "sparse-logreg", "--n-features", "16", "--nnz", "3")
FACTORS = (*TINY, "--source", "matrix-factorization", "--n-users", "8", "--n-items", "6",
           "--rank", "2")
BASES = {"gpt": TINY, "lstm": LSTM, "mlp": MLP, "local-sgd": LOCAL_SGD, "logreg": LOGREG,
         "factors": FACTORS}  # a case starts from one
BASE_WEIGHTS = (3, 1, 1, 1, 1, 1)

# name: (ranks, flags); each stops at step 3 of 6 and saves, so a resume has steps left to run
PREPARED = {"gpt-1": (1, TINY), "gpt-2": (2, TINY), "local-sgd-2": (2, LOCAL_SGD),
            "lstm-1": (1, LSTM), "mlp-1": (1, MLP)}

TOMLS = {
    "good.toml": "[optim]\nlr = 0.01\n[train]\nseed = 3\n",
    "empty.toml": "",
    "truncated.toml": "[model]\nd_model = 16\n[trai",
    "typed.toml": '[model]\nd_model = "16"\n[train]\nsteps = 2.5\nprogress = 1\nmetrics = 5\n',
    "unknown.toml": "[modle]\nd_model = 16\n[train]\nstepz = 3\n",
    "nested.toml": "[model.gpt]\nd_model = 16\n[train]\nsave = {dir = 'x'}\n",
    "huge.toml": "[model]\nd_model = 9223372036854775807\nhidden_sizes = [[1], 'a', 1.5]\n"
                 "[optim]\nlr = nan\n[train]\nseed = -9223372036854775808\n",
}
TEXT = "the quick brown fox jumps over the lazy dog; " * 60


def populate(tmp: Path, rnd: random.Random) -> None:
    """The files that flag values name through ``{tmp}``."""
    (tmp / "dir").mkdir()
    (tmp / "dir" / "inside.txt").write_text("x")
    (tmp / "file.txt").write_text(TEXT)
    (tmp / "text.txt").write_text(TEXT)
    (tmp / "short.txt").write_text("ab")
    (tmp / "latin1.txt").write_bytes(TEXT.encode() + b"caf\xe9\n")
    (tmp / "empty").write_bytes(b"")
    (tmp / "binary.bin").write_bytes(rnd.randbytes(4096))
    (tmp / "binary.toml").write_bytes(rnd.randbytes(512))
    for name, text in TOMLS.items():
        (tmp / name).write_text(text)
    os.mkfifo(tmp / "fifo")  # opening it blocks until the other end opens too
    (tmp / "loop").symlink_to("loop")
    (tmp / "dangling").symlink_to("/nonexistent/scratchpar-fuzz")


def _meta(ck: Path) -> dict:
    return json.loads((ck / "meta.json").read_text())


def _set_meta(ck: Path, meta) -> None:
    (ck / "meta.json").write_text(json.dumps(meta))


def _pieces(meta: dict, name: str | None = None) -> list[dict]:
    """The index entries of every piece (of the file ``name`` alone, where given)."""
    return [p for named in meta["arrays"].values() for entry in named.values()
            for p in entry["pieces"] if name in (None, p["file"])]


def _readable(path: Path) -> dict:
    """The members of an .npz that still load, by key; none where the file no longer opens."""
    found = {}
    try:
        with np.load(path, allow_pickle=False) as npz:
            for key in npz.files:
                try:
                    found[key] = npz[key]
                except Exception:  # a damaged member: bad CRC, header, size, object array…
                    pass
    except Exception:  # no zip any more (truncated, its directory flipped…)
        pass
    return found


def _rehash(ck: Path, path: Path) -> None:
    """Each piece of ``path`` that still reads, its checksum in the index recomputed: a damage
    only a deeper check can catch."""
    meta, arrays = _meta(ck), _readable(path)
    for piece in _pieces(meta, path.name):
        if piece["key"] in arrays:
            piece["sha256"] = digest(arrays[piece["key"]])
    _set_meta(ck, meta)


def _any_npz(ck: Path, rnd: random.Random) -> Path:
    return ck / rnd.choice(sorted(p.name for p in ck.glob("*.npz")))


def _truncate(ck, rnd, rehash):
    path = _any_npz(ck, rnd)
    data = path.read_bytes()
    path.write_bytes(data[:rnd.randrange(len(data))])
    if rehash:
        _rehash(ck, path)


def _flip(ck, rnd, name, rehash=False):
    path = ck / name if name else _any_npz(ck, rnd)
    data = bytearray(path.read_bytes())
    for _ in range(rnd.randint(1, 8)):
        data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
    path.write_bytes(bytes(data))
    if rehash:
        _rehash(ck, path)


def _drop_part(ck, rnd, forget):
    """Delete one pieces file, another rank's than rank 0's where there are several; with
    ``forget``, its pieces leave the index too, as if never written (and an array with no
    piece left with them)."""
    names = sorted(p.name for p in ck.glob("*.npz"))
    name = rnd.choice([n for n in names if n != "rank0.pieces.npz"] or names)
    (ck / name).unlink()
    if forget:
        meta = _meta(ck)
        for named in meta["arrays"].values():
            for array, entry in list(named.items()):
                entry["pieces"] = [p for p in entry["pieces"] if p["file"] != name]
                if not entry["pieces"]:
                    del named[array]
        _set_meta(ck, meta)


def _edit(ck, rnd, key, values):
    meta = _meta(ck)
    meta[key] = rnd.choice(values)
    _set_meta(ck, meta)


def _edit_index(ck, rnd):
    """The index (every array's pieces and their checksums) replaced by a hostile one: not a
    table, empty, a part that is no table, an array with no fields, a piece outside the
    checkpoint's folder."""
    meta = _meta(ck)
    escaped = copy.deepcopy(meta["arrays"])
    rnd.choice(_pieces({"arrays": escaped}))["file"] = "../model.npz"
    meta["arrays"] = rnd.choice([[], {}, {"model": 5}, {"model": {"w": {}}}, escaped])
    _set_meta(ck, meta)


def _edit_scalars(ck, rnd, parts, values):
    """The scalars of one part (or of a part the checkpoint has not) replaced."""
    meta = _meta(ck)
    meta["scalars"][rnd.choice(parts)] = rnd.choice(values)
    _set_meta(ck, meta)


def _mangle(ck, rnd, values):
    """One piece of one file replaced by a wrong array, under a checksum that matches where it
    reads: the reader's header check must refuse it."""
    path = _any_npz(ck, rnd)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays[rnd.choice(sorted(arrays) or ["p0"])] = rnd.choice(values)
    np.savez(path, **arrays)
    _rehash(ck, path)


def _bomb(ck, rnd):
    """One piece whose header promises 8 TB of float64: loading must fail on it, fast. The
    other pieces are as written, so the index still matches them."""
    path = _any_npz(ck, rnd)
    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    header = ("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }"
              .ljust(117) + "\n").encode()  # 10 + 118 bytes: the .npy v1 header's alignment
    members[rnd.choice(sorted(members) or ["p0.npy"])] = (
        b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(64))
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def _devzero(ck, rnd):
    """A pieces file replaced by a link to /dev/zero: endless, and no regular file."""
    path = _any_npz(ck, rnd)
    path.unlink()
    path.symlink_to("/dev/zero")


def _empty(ck):
    for p in ck.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()


CORRUPTIONS = {
    "truncate": lambda ck, r: _truncate(ck, r, False),
    "truncate-rehash": lambda ck, r: _truncate(ck, r, True),
    "flip": lambda ck, r: _flip(ck, r, None),
    "flip-rehash": lambda ck, r: _flip(ck, r, None, True),
    "flip-meta": lambda ck, r: _flip(ck, r, "meta.json"),
    "drop-part": lambda ck, r: _drop_part(ck, r, False),
    "drop-part-and-sha": lambda ck, r: _drop_part(ck, r, True),
    "meta-not-object": lambda ck, r: _set_meta(ck, r.choice([[], 1, None, "meta", [{}]])),
    "meta-deep": lambda ck, r: (ck / "meta.json").write_text("[" * 100000 + "]" * 100000),
    "step": lambda ck, r: _edit(ck, r, "step", ["3", "three", 3.5, -1, 10**30, None, True]),
    "dropout-rng": lambda ck, r: _edit(ck, r, "dropout_rng", [
        [], [{}], "x", [None], [[1, 2]], [{"bit_generator": "MT19937"}],
        [{"key": -1, "position": 0}], [{"key": 2**64, "position": 0}],
        [{"key": 1, "position": True}], [{"key": 1.5, "position": 0}]]),
    "sha256": _edit_index,  # the checksums live in the index now: the index is edited
    "part-meta": lambda ck, r: _edit_scalars(ck, r, ["optim", "model", "local_sgd", "nowhere"],
                                             ["x", [], {"world": -1, "diverged": True},
                                              {"world": 0}, {"steps": "x"}, {"lr": "fast"}]),
    "wrong-array": lambda ck, r: _mangle(ck, r, [np.zeros((3, 5)), np.zeros(()), np.array(
        ["a", "b"]), np.zeros(7, np.complex64), np.full(4, np.nan), np.zeros((0, 2**20))]),
    "object-array": lambda ck, r: _mangle(ck, r, [np.array([{}, None], dtype=object)]),
    "bomb": _bomb,
    "empty-dir": lambda ck, r: _empty(ck),
    "no-meta": lambda ck, r: (ck / "meta.json").unlink(),
    "meta-is-dir": lambda ck, r: ((ck / "meta.json").unlink(), (ck / "meta.json").mkdir()),
    "meta-is-fifo": lambda ck, r: ((ck / "meta.json").unlink(), os.mkfifo(ck / "meta.json")),
    "npz-is-devzero": _devzero,
}
