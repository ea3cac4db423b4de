"""Checkpoints: a directory of ``.npz`` arrays and JSON metadata, written atomically, never
pickled. This file holds what every format shares, and the single-file format, in which one
writer holds every array (a consolidated checkpoint, and every run before sharded ones)::

    meta.json     step, config, RNG states, scalar state, and the SHA-256 of each array file
    model.npz     parameter name → array
    optim.npz     optimizer state name → array

A run writes the sharded format (``sharded.py``): each rank its own pieces; both are read by
``stored.py``.

The directory is written beside its destination as ``.DIR.tmp-HOST-PID`` and renamed into
place, so a reader never sees a mixture of two checkpoints. A crash between the two renames
leaves the old checkpoint intact as ``.DIR.old-HOST-PID``. Each save removes the temporaries
that writers on this host left behind when they died. Loading verifies every checksum and
refuses object arrays (``allow_pickle=False``): a checkpoint can never run code.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import threading
import zipfile
from pathlib import Path

import numpy as np

from ..backend import to_host


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, corrupt, truncated or unsafe."""


def save_checkpoint(directory: str | os.PathLike, arrays: dict[str, dict], meta: dict) -> None:
    """Write ``arrays`` (file stem → name → array) and ``meta`` to ``directory`` atomically: the
    single-file format, one writer holding every array (a consolidated checkpoint's)."""
    final = Path(os.path.abspath(directory))
    tmp = temporary(final)
    digests = {}
    for stem, named in arrays.items():
        path = tmp / f"{stem}.npz"
        with open(path, "wb") as fh:
            np.savez(fh, **{k: to_host(v) for k, v in named.items()})
            fh.flush()
            os.fsync(fh.fileno())
        digests[stem] = _sha256(path)
    write_json(tmp / "meta.json", {**meta, "sha256": digests})
    commit(tmp, final)


def temporary(final: Path) -> Path:
    """A fresh, empty ``.NAME.tmp-HOST-PID`` folder beside ``final``, to write a checkpoint in."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp-{socket.gethostname()}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    return tmp


def commit(tmp: Path, final: Path) -> None:
    """Put the finished checkpoint ``tmp`` in ``final``'s place: two renames that no interrupt
    comes between, the previous checkpoint kept as ``.NAME.old-HOST-PID`` until the second is
    done, then removed with whatever dead writers on this host left behind."""
    old = final.with_name(f".{final.name}.old-{socket.gethostname()}-{os.getpid()}")
    with _deferred(signal.SIGINT, signal.SIGTERM):
        if final.exists():
            final.rename(old)
        tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    for stale in _left_behind(final):
        shutil.rmtree(stale, ignore_errors=True)


@contextlib.contextmanager
def _deferred(*signals):
    """Defer ``signals`` until the block ends: one that comes meanwhile is recorded, then
    raised again once the previous handlers are back. Python runs its handlers in the main
    thread whichever thread the system delivers a signal to (MPI's own threads take it where
    the main one masks it), so only a handler can hold it; a thread other than the main one
    cannot set one, and defers nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came = []
    previous = {s: signal.signal(s, lambda number, frame: came.append(number)) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for number in dict.fromkeys(came):
            signal.raise_signal(number)


def _left_behind(final: Path) -> list[Path]:
    """The ``.NAME.tmp-HOST-PID`` and ``.NAME.old-HOST-PID`` folders beside ``final`` whose
    writer, a process on this host, is gone (another host's cannot be checked: they stay).
    Older versions wrote ``.NAME.tmp-PID``: those count as this host's."""
    pattern = re.compile(rf"\.{re.escape(final.name)}\.(tmp|old)-(?:(.+)-)?(\d+)")
    found = []
    for path in final.parent.glob(f".{glob.escape(final.name)}.*-*"):
        match = pattern.fullmatch(path.name)
        if match and match[2] in (None, socket.gethostname()) and not _alive(int(match[3])):
            found.append(path)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # it exists, owned by someone else
        pass
    return True


def load_single(directory: str | os.PathLike, meta: dict) -> dict[str, dict]:
    """Read a single-file checkpoint's arrays (file stem → name → NumPy array), ``meta`` its
    ``meta.json``, every file's checksum verified. Raises CheckpointError."""
    root = Path(directory)
    digests = meta.get("sha256")
    if not isinstance(digests, dict) or not all(
            isinstance(d, str) and re.fullmatch(r"[\w.-]+", s) for s, d in digests.items()):
        raise CheckpointError(f"{root}/meta.json lists no checksums, or malformed ones")
    arrays = {}
    for stem, digest in digests.items():
        path = root / f"{stem}.npz"
        if not path.is_file():
            raise CheckpointError(f"{path} is missing")
        if _sha256(path) != digest:
            raise CheckpointError(f"{path} does not match its checksum: truncated or modified")
        arrays[stem] = _load_npz(path)
    return arrays


def read_meta(directory: str | os.PathLike) -> dict:
    """A checkpoint's ``meta.json`` alone (its step, its run's config…), its arrays unread.
    Raises CheckpointError."""
    root = Path(directory)
    if not root.is_dir():
        raise CheckpointError(f"{root}: no such directory{_interrupted_hint(root)}")
    if not (root / "meta.json").is_file():  # absent, or a pipe that would block the read
        raise CheckpointError(f"{root}: not a checkpoint (no meta.json file)")
    try:
        meta = json.loads((root / "meta.json").read_bytes())
    except (OSError, ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise CheckpointError(f"{root}/meta.json is unreadable or corrupt: {e}") from e
    if not isinstance(meta, dict):
        raise CheckpointError(f"{root}/meta.json holds a {type(meta).__name__}, not an object")
    return meta


def _interrupted_hint(root: Path) -> str:
    """Where a save that was cut off between its two renames left the previous checkpoint."""
    final = Path(os.path.abspath(root))
    old = sorted(final.parent.glob(f".{glob.escape(final.name)}.old-*"))
    return f" (a save was cut off: the previous checkpoint is in {old[0]})" if old else ""


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
    """The SHA-256 of a file's bytes, read a MiB at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_json(path: Path, obj: dict) -> None:
    """``obj`` as JSON in ``path``, on the disk when this returns."""
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
