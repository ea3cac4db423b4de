"""Checkpoints: a directory of ``.npz`` arrays and JSON metadata, written atomically, never pickled.

Layout of ``DIR``::

    meta.json     step, config, RNG states, scalar state, and the SHA-256 of each array file
    model.npz     parameter name → array
    optim.npz     optimizer state name → array

The directory is written beside its destination and renamed into place, so a reader never sees
a mixture of two checkpoints; a crash between the two renames leaves the old checkpoint intact
under a hidden ``.DIR.old-PID`` name. Loading verifies every checksum and refuses
object arrays (``allow_pickle=False``): a checkpoint can never run code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np

from ..backend import to_host


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, corrupt, truncated or unsafe."""


def split_state(state: dict) -> tuple[dict, dict]:
    """Separate a flat state dict into arrays and JSON scalars."""
    arrays = {k: v for k, v in state.items() if hasattr(v, "shape") and getattr(v, "ndim", 0) > 0}
    scalars = {k: (v.item() if hasattr(v, "item") else v) for k, v in state.items()
               if k not in arrays}
    return arrays, scalars


def save_checkpoint(directory: str | os.PathLike, arrays: dict[str, dict], meta: dict) -> None:
    """Write ``arrays`` (file stem → name → array) and ``meta`` to ``directory`` atomically."""
    final = Path(directory)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    digests = {}
    for stem, named in arrays.items():
        path = tmp / f"{stem}.npz"
        with open(path, "wb") as fh:
            np.savez(fh, **{k: to_host(v) for k, v in named.items()})
            fh.flush()
            os.fsync(fh.fileno())
        digests[stem] = _sha256(path)
    _write_json(tmp / "meta.json", {**meta, "sha256": digests})
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(directory: str | os.PathLike) -> tuple[dict[str, dict], dict]:
    """Read a checkpoint: (file stem → name → NumPy array, meta). Raises CheckpointError."""
    root = Path(directory)
    try:
        meta = json.loads((root / "meta.json").read_text())
    except FileNotFoundError as e:
        raise CheckpointError(f"{root}: not a checkpoint (no meta.json)") from e
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{root}/meta.json is unreadable or corrupt: {e}") from e
    digests = meta.get("sha256")
    if not isinstance(digests, dict):
        raise CheckpointError(f"{root}/meta.json lists no checksums")
    arrays = {}
    for stem, digest in digests.items():
        path = root / f"{stem}.npz"
        if not path.is_file():
            raise CheckpointError(f"{path} is missing")
        if _sha256(path) != digest:
            raise CheckpointError(f"{path} does not match its checksum: truncated or modified")
        arrays[stem] = _load_npz(path)
    return arrays, meta


def _load_npz(path: Path) -> dict:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise CheckpointError(f"{path} holds an object array; refusing to unpickle it") from e
        raise CheckpointError(f"{path} is corrupt: {e}") from e
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise CheckpointError(f"{path} is truncated or corrupt: {e}") from e


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_json(path: Path, obj: dict) -> None:
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
