"""The sharded checkpoint format: every rank writes the pieces of the state it holds, all at
once, and rank 0 commits them with their index, written last (the plan of Megatron-LM's
distributed checkpoints and PyTorch's Distributed Checkpoint; the format is this engine's).

Layout of ``DIR``::

    meta.json             step, config, RNG states, the scalars of each part, and the index:
                          each array of each part, its shape and dtype, and its pieces (the file
                          and key that hold it, the block of the array it is, the SHA-256 of
                          its bytes)
    rank{r}.pieces.npz    rank r's pieces, keyed p0, p1, …

No array passes through rank 0: it gathers the index entries alone. A piece is named by the
one-device state's name and its block (``parallel/pieces.py``), so any layout reads it back.
"""

from __future__ import annotations

import hashlib
import math
import os
import zipfile
from pathlib import Path

import numpy as np

from ..backend import to_host
from .checkpoint import commit, temporary, write_json

FORMAT = "sharded-1"
SHARED = ("a checkpoint in pieces needs a --save folder that every rank sees (on a cluster, a "
          "shared filesystem)")
DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "bool", "int8", "int16",
                    "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def save_sharded(directory, pieces: list, scalars: dict, meta: dict, comm=None) -> None:
    """Collective over ``comm`` (``None``: this process alone): write each rank's ``pieces``
    (:class:`~scratchpar.parallel.pieces.Piece`) into ``directory`` with the index, rank 0's
    ``meta`` and the ranks' ``scalars`` (part → name → value, rank 0's first where two ranks
    name one), and replace any checkpoint there atomically. Returns when it is committed."""
    rank = 0 if comm is None else comm.rank
    final = Path(os.path.abspath(directory))
    tmp = str(temporary(final)) if rank == 0 else None
    if comm is not None:
        tmp = comm.allgather_obj(tmp, "checkpoint folder")[0]
    folder, name = Path(tmp), f"rank{rank}.pieces.npz"
    if not folder.is_dir():
        raise RuntimeError(f"rank {rank} does not see {folder}, the folder rank 0 made to "
                           f"save in: {SHARED}")
    entries = write_pieces(folder / name, name, pieces) if pieces else []
    everyone = [(entries, scalars)] if comm is None else \
        comm.gather_obj((entries, scalars), "checkpoint index")  # on rank 0 alone
    if rank == 0:
        unseen = sorted({e["file"] for found, _ in everyone for e in found
                         if not (folder / e["file"]).is_file()})
        if unseen:
            raise RuntimeError(f"{', '.join(unseen)}, written by other ranks, are not in "
                               f"{folder} as rank 0 sees it: {SHARED}")
        arrays, merged = index(everyone)
        write_json(Path(tmp) / "meta.json",
                   {**meta, "format": FORMAT, "scalars": merged, "arrays": arrays})
        commit(Path(tmp), final)
    if comm is not None:
        comm.barrier()


def stored_form(array: np.ndarray) -> np.ndarray:
    """What a file holds for ``array``: bfloat16 (``ml_dtypes``, which NumPy's files cannot
    name) as its 16 bits, every other dtype as it is."""
    return array.view(np.uint16) if array.dtype.name == "bfloat16" else array


def digest(array: np.ndarray) -> str:
    """The SHA-256 of an array's bytes in C order."""
    return hashlib.sha256(np.ascontiguousarray(array).reshape(-1).view(np.uint8)).hexdigest()


def write_pieces(path: Path, name: str, pieces: list) -> list[dict]:
    """Write ``pieces`` into the file ``path`` (called ``name`` in the index), one at a time (a
    device's piece copied to the host alone, then dropped), and return their index entries:
    an ``.npz`` as NumPy writes one, uncompressed."""
    entries = []
    with open(path, "wb") as fh:
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
            for i, p in enumerate(pieces):
                held = stored_form(np.ascontiguousarray(to_host(p.array)).reshape(p.block.shape))
                with zf.open(f"p{i}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, held, allow_pickle=False)
                entries.append({"part": p.part, "name": p.name, "key": f"p{i}", "file": name,
                                "dtype": np.dtype(p.array.dtype).name, "sha256": digest(held),
                                "whole": list(p.block.whole), "view": list(p.block.view),
                                "offsets": list(p.block.offsets), "shape": list(p.block.shape)})
        fh.flush()  # the central directory too, written as the zip closed
        os.fsync(fh.fileno())
    return entries


def index(everyone: list[tuple[list[dict], dict]]) -> tuple[dict, dict]:
    """The index of every rank's entries (part → name → shape, dtype, pieces) and the merged
    scalars. Raises RuntimeError where the ranks' pieces of an array disagree or do not add
    up to it once: a strategy's pieces that cannot be read back are a bug, caught before the
    checkpoint replaces the last one."""
    arrays, scalars = {}, {}
    for entries, named in everyone:
        for part, values in named.items():
            for key, value in values.items():
                scalars.setdefault(part, {}).setdefault(key, value)
        for e in entries:
            entry = arrays.setdefault(e["part"], {}).setdefault(
                e["name"], {"shape": e["whole"], "dtype": e["dtype"], "pieces": []})
            if (entry["shape"], entry["dtype"]) != (e["whole"], e["dtype"]):
                raise RuntimeError(f"{e['part']}/{e['name']}: pieces of shapes {entry['shape']} "
                                   f"and {e['whole']}, dtypes {entry['dtype']} and {e['dtype']}")
            entry["pieces"].append({k: e[k] for k in ("file", "key", "view", "offsets",
                                                      "shape", "sha256")})
    for part, named in arrays.items():
        for name, entry in named.items():
            held = sum(math.prod(p["shape"]) for p in entry["pieces"])
            if held != math.prod(entry["shape"]):
                raise RuntimeError(f"{part}/{name}: the ranks' pieces hold {held} elements of "
                                   f"its {math.prod(entry['shape'])}")
    for part in scalars:
        arrays.setdefault(part, {})
    return arrays, scalars
