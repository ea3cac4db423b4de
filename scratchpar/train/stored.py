"""A checkpoint opened for reading, in either format: its meta, the arrays of each part, and
any block of any of them, read from the pieces that overlap it and verified as they are read.

A run reads what it will hold and no more: a ZeRO rank its chunks, a tensor-parallel rank its
shards. Every piece read is checked against the index (its dtype, its shape, the SHA-256 of its
bytes); nothing is unpickled, and nothing is allocated that the index did not promise.
"""

from __future__ import annotations

import math
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..autograd.precision import bfloat16
from ..backend import to_host
from ..parallel.pieces import Block, fill, split_state
from .checkpoint import CheckpointError, load_single, read_meta
from .sharded import DTYPES, FORMAT, digest, stored_form


class Whole:
    """What a reader of a checkpoint's arrays (``parts``, ``names``, ``read``, ``scalars``)
    offers whole, on one device where it fits."""

    def part(self, part: str) -> dict:
        """The whole of ``part``: each array whole, and its scalars."""
        return {**{name: self.read(part, name) for name in self.names(part)},
                **self.scalars(part)}

    def state(self) -> dict:
        """The whole one-device state, every part (``strategy.load_state_dict``'s argument)."""
        return {part: self.part(part) for part in self.parts()}


@dataclass
class Array:
    """One array of a checkpoint: its shape and dtype, and ``(block, load)`` for each piece."""

    shape: tuple[int, ...]
    dtype: str
    pieces: list


class Stored(Whole):
    """The checkpoint in ``directory``: :meth:`read` any block of any array, :meth:`state` the
    whole of it on this device (where it fits). Raises CheckpointError for one that is
    missing, malformed, corrupt or unsafe. Close it when done (or use it in ``with``)."""

    def __init__(self, directory):
        self.directory, self.meta = str(directory), read_meta(directory)
        self._files: dict[str, object] = {}
        form = self.meta.get("format")
        if form == FORMAT:
            self.arrays, self._scalars = self._index()
        elif form is not None:
            raise CheckpointError(f"{directory} is in the format {form!r}, which this version "
                                  "of scratchpar does not read")
        else:  # the single-file format: every array whole, read and verified now
            single = load_single(directory, self.meta)
            self._hold(single, {part: self.meta.get(part, {}) for part in single})

    @classmethod
    def of(cls, state: dict) -> Stored:
        """A one-device state in memory (part → name → array or scalar), read as a checkpoint."""
        stored = cls.__new__(cls)
        stored.directory, stored.meta, stored._files = "(in memory)", {}, {}
        arrays, scalars = split_state(state)
        stored._hold({part: {k: to_host(a) for k, a in named.items()}
                      for part, named in arrays.items()}, scalars)
        return stored

    def _hold(self, arrays: dict, scalars: dict) -> None:
        """Whole arrays (part → name → array) as the pieces of a checkpoint, and its scalars."""
        self.arrays = {part: {name: Array(a.shape, a.dtype.name,
                                          [(Block.full(a.shape), lambda a=a: a)])
                              for name, a in named.items()} for part, named in arrays.items()}
        self._scalars = scalars

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def parts(self) -> list[str]:
        return list(self.arrays)

    def names(self, part: str) -> list[str]:
        """The arrays of ``part`` (scalars are :meth:`scalars`)."""
        return list(self.arrays.get(part, {}))

    def scalars(self, part: str) -> dict:
        scalars = self._scalars.get(part, {})
        if not isinstance(scalars, dict):
            raise CheckpointError(f"{self.directory}: the scalars of {part} are not a table")
        return dict(scalars)

    def read(self, part: str, name: str, block: Block | None = None) -> np.ndarray:
        """The ``block`` (default: all) of array ``name`` of ``part``, in its saved dtype.
        Raises ValueError for an array the checkpoint has not or a block of another shape,
        CheckpointError for a piece that is missing or corrupt."""
        if name not in self.arrays.get(part, {}):
            raise ValueError(f"the checkpoint has no {part} array {name}")
        array = self.arrays[part][name]
        block = block or Block.full(array.shape)
        if block.whole != array.shape:
            raise ValueError(f"{part} {name}: the checkpoint's is {array.shape}, this run's "
                             f"{block.whole}")
        out = np.empty(block.shape, dtype=_dtype(array.dtype))
        fill(block, out, array.pieces, f"{part} {name}")
        return out

    def close(self) -> None:
        for npz in self._files.values():
            npz.close()
        self._files.clear()

    # -- the sharded format's index and pieces ----------------------------------------------------
    def _index(self) -> tuple[dict, dict]:
        arrays, scalars = self.meta.get("arrays"), self.meta.get("scalars")
        if not isinstance(arrays, dict) or not isinstance(scalars, dict):
            raise CheckpointError(f"{self.directory}/meta.json has no index of its arrays")
        out = {}
        for part, named in arrays.items():
            if not isinstance(named, dict):
                raise CheckpointError(f"{self.directory}/meta.json: part {part!r} is no table")
            out[part] = {name: self._array(part, name, entry) for name, entry in named.items()}
        return out, scalars

    def _array(self, part: str, name: str, entry) -> Array:
        what = f"{self.directory}/meta.json: {part} {name}"
        try:
            shape, dtype = _ints(entry["shape"]), entry["dtype"]
            if dtype not in DTYPES:
                raise ValueError(f"dtype {dtype!r}")
            pieces = []
            for p in entry["pieces"]:
                if not (re.fullmatch(r"rank\d+\.pieces\.npz", p["file"])
                        and re.fullmatch(r"p\d+", p["key"])
                        and re.fullmatch(r"[0-9a-f]{64}", p["sha256"])):
                    raise ValueError(f"piece {p['file']!r} {p['key']!r}")
                block = Block(shape, _ints(p["view"]), _ints(p["offsets"]), _ints(p["shape"]))
                if block.problems():
                    raise ValueError(block.problems()[0])
                pieces.append((block, lambda p=p, b=block: self._piece(p, b, dtype)))
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"{what} is malformed: {e}") from e
        if sum(b.size for b, _ in pieces) != math.prod(shape):
            raise CheckpointError(f"{what}: its pieces do not add up to its shape {shape}")
        return Array(shape, dtype, pieces)

    def _piece(self, entry: dict, block: Block, dtype: str) -> np.ndarray:
        """One piece, read from its file and checked against the index: its header before a
        byte of it is allocated (a file may promise terabytes), then its bytes' SHA-256."""
        path = Path(self.directory) / entry["file"]
        want = stored_form(np.empty(0, _dtype(dtype))).dtype
        try:
            if entry["file"] not in self._files:
                if not path.is_file():
                    raise CheckpointError(f"{path} is missing")
                self._files[entry["file"]] = zipfile.ZipFile(path)
            with self._files[entry["file"]].open(f"{entry['key']}.npy") as fh:
                version = np.lib.format.read_magic(fh)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, fortran, found = read_header(fh)
                if found != want or shape != block.shape or fortran:
                    raise CheckpointError(f"{path} piece {entry['key']}: its header says {found} "
                                          f"{shape}, its index {want} {block.shape}")
                array = np.frombuffer(fh.read(block.size * want.itemsize), want)
        except KeyError as e:
            raise CheckpointError(f"{path} holds no piece {entry['key']}") from e
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as e:
            raise CheckpointError(f"{path} is truncated or corrupt: {e}") from e
        if array.size != block.size or digest(array) != entry["sha256"]:
            raise CheckpointError(f"{path} piece {entry['key']} does not match its index "
                                  "entry: truncated or modified")
        return array.reshape(block.shape).view(_dtype(dtype))


def _dtype(name: str) -> np.dtype:
    return bfloat16() if name == "bfloat16" else np.dtype(name)


def _ints(values) -> tuple[int, ...]:
    if not isinstance(values, list) or not all(type(v) is int and v >= 0 for v in values):
        raise ValueError(f"{values!r} is not a list of sizes")
    return tuple(values)


def open_checkpoint(directory) -> Stored:
    """The checkpoint in ``directory``, opened (see :class:`Stored`)."""
    return Stored(directory)


def load_checkpoint(directory) -> tuple[dict[str, dict], dict]:
    """Every array of a checkpoint whole (part → name → array) and its meta, each part's
    scalars under the part's name as the single-file format keeps them."""
    with Stored(directory) as stored:
        arrays = {part: {name: stored.read(part, name) for name in stored.names(part)}
                  for part in stored.parts()}
        return arrays, {**stored.meta, **{part: stored.scalars(part) for part in arrays}}
