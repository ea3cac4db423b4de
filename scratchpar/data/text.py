"""Character-level language modelling on a UTF-8 text file: windows at seeded random offsets."""

from __future__ import annotations

import os

import numpy as np

from scratchpar.backend import rng
from scratchpar.data.checks import check_int, check_rows, check_step
from scratchpar.data.errors import DataError

_BATCH_STREAM = 2


class Characters:
    """A text's vocabulary: character ``chars[i]`` has id ``i + 1``, and id ``0`` is ``PAD``;
    ``vocab_size = len(chars) + 1``. What a trained model reads and writes text with, with or
    without the text it learned from."""

    PAD = 0

    def __init__(self, chars: str):
        self.chars = chars
        self.vocab_size = len(chars) + 1
        self._index = {c: i + 1 for i, c in enumerate(chars)}

    def encode(self, text: str) -> np.ndarray:
        """The int32 ids of ``text`` (a code point fits 21 bits); a character outside the
        vocabulary is a DataError."""
        try:
            return np.fromiter((self._index[c] for c in text), dtype=np.int32, count=len(text))
        except KeyError as err:
            raise DataError(f"character {err.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids) -> str:
        """The text of ``ids`` (any integer array-like); ``PAD`` ids are dropped."""
        ids = np.asarray(ids).ravel()  # (N,)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise DataError(f"ids must be integers, got dtype {ids.dtype}")
        bad = (ids < 0) | (ids >= self.vocab_size)  # (N,)
        if bad.any():
            raise DataError(f"id {ids[bad][0]} is outside [0, {self.vocab_size})")
        return "".join(self.chars[i - 1] for i in ids.tolist() if i != self.PAD)

    def entropy_floor(self) -> None:
        """Unknown for real text: ``None``."""
        return None


class CharText(Characters):
    """Random windows of ``seq_len + 1`` characters from one text file, as int32 ids.

    The vocabulary is the sorted set of characters in the file; this dataset never produces
    ``PAD`` (every window is full). ``batch(step, b)`` is a pure function of ``(seed, step)``.
    Given ``chars``, the vocabulary is that one instead (a trained model's, read on another
    text): a character of the file outside it is a DataError.
    """

    def __init__(self, path: str | os.PathLike, seq_len: int = 64, seed: int = 0,
                 chars: str | None = None):
        self.seq_len = check_int("seq_len", seq_len, 1)
        self.seed = check_int("seed", seed, 0)
        self.path = os.fspath(path)
        text = _read_utf8(self.path)
        if len(text) < self.seq_len + 2:
            raise DataError(
                f"{self.path}: {len(text)} characters, but seq_len={self.seq_len} needs at least "
                f"seq_len + 2 = {self.seq_len + 2}"
            )
        super().__init__("".join(sorted(set(text))) if chars is None else chars)
        unseen = sorted(set(text) - set(self.chars))
        if unseen:
            many = "s" if len(unseen) > 1 else ""
            raise DataError(f"{self.path}: {len(unseen)} character{many} outside the model's "
                            f"vocabulary of {len(self.chars)}: {''.join(unseen[:20])!r}")
        self.data = self.encode(text)  # (N,)

    def batch(self, step: int, batch_size: int, rows=None) -> np.ndarray:
        """Batch ``step``: int32 ``(batch_size, seq_len + 1)``, windows at uniform offsets;
        with ``rows = (start, stop)``, those rows alone (every offset is drawn, B integers,
        and only those windows are cut)."""
        step, batch_size = check_step(step, batch_size)
        first, stop = check_rows(rows, batch_size)
        n_offsets = len(self.data) - self.seq_len  # windows of seq_len + 1 that fit
        start = rng(self.seed, _BATCH_STREAM, step).integers(0, n_offsets, size=batch_size)  # (B,)
        return self.data[start[first:stop, None] + np.arange(self.seq_len + 1)]  # (b, T+1)


def _read_utf8(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            return f.read()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror})") from None
