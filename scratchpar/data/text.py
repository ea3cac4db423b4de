"""Character-level language modelling on a UTF-8 text file: windows at seeded random offsets,
the last part of the file held out."""

from __future__ import annotations

import os

import numpy as np

from scratchpar.backend import rng
from scratchpar.data.checks import check_fraction, check_int, check_rows, check_step
from scratchpar.data.errors import DataError

_BATCH_STREAM, _HELD_OUT_STREAM = 2, 3


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

    def bayes_risk(self) -> None:
        """Unknown for real text: ``None``."""
        return None


class CharText(Characters):
    """Windows of ``seq_len + 1`` characters from one text file, as int32 ids, the file cut once:
    its last ``eval_fraction`` is held out. Training batches are windows of the part before the
    cut, held-out batches windows of the part after it, so no held-out window shares a character
    position with a training window (a text has only the samples of its file; the other
    sources draw fresh ones, ``data/fresh.py``). ``eval_fraction`` 1 holds out the whole file:
    a text the model never trained on, which has no training batches.

    The vocabulary is the sorted set of characters in the whole file; this dataset never
    produces ``PAD`` (every window is full). ``batch(step, b)`` is a pure function of
    ``(seed, step)``, ``held_out(i, b)`` of ``(seed, i)``. Given ``chars``, the vocabulary is
    that one instead (a trained model's, read on another text): a character of the file outside
    it is a DataError.
    """

    def __init__(self, path: str | os.PathLike, seq_len: int = 64, seed: int = 0,
                 chars: str | None = None, eval_fraction: float = 0.1):
        self.seq_len = check_int("seq_len", seq_len, 1)
        self.seed = check_int("seed", seed, 0)
        self.eval_fraction = check_fraction("eval_fraction", eval_fraction)
        self.path = os.fspath(path)
        text = _read_utf8(self.path)
        super().__init__("".join(sorted(set(text))) if chars is None else chars)
        unseen = sorted(set(text) - set(self.chars))
        if unseen:
            many = "s" if len(unseen) > 1 else ""
            raise DataError(f"{self.path}: {len(unseen)} character{many} outside the model's "
                            f"vocabulary of {len(self.chars)}: {''.join(unseen[:20])!r}")
        self.data = self.encode(text)  # (N,)
        self.cut = len(text) - round(self.eval_fraction * len(text))  # data[:cut] trains
        self._check_parts()

    def batch(self, step: int, batch_size: int, rows=None) -> np.ndarray:
        """Training batch ``step``: int32 ``(batch_size, seq_len + 1)``, windows at uniform
        offsets in the part before the cut; with ``rows = (start, stop)``, those rows alone
        (every offset is drawn, B integers, and only those windows are cut)."""
        step, batch_size = check_step(step, batch_size)
        first, stop = check_rows(rows, batch_size)
        if self.cut == 0:
            raise DataError(f"{self.path} is held out whole (eval_fraction 1): nothing to "
                            "train on")
        start = self._starts(0, self.cut, rng(self.seed, _BATCH_STREAM, step), batch_size)
        return self._windows(start[first:stop])  # (b, T+1)

    def held_out(self, i: int, batch_size: int) -> np.ndarray:
        """Held-out batch ``i``: int32 ``(batch_size, seq_len + 1)``, windows at uniform
        offsets in the part after the cut."""
        i, batch_size = check_step(i, batch_size)
        gen = rng(self.seed, _HELD_OUT_STREAM, i)
        return self._windows(self._starts(self.cut, len(self.data), gen, batch_size))  # (B, T+1)

    def _starts(self, begin: int, end: int, gen, batch_size: int) -> np.ndarray:
        """``batch_size`` uniform offsets of windows wholly inside ``data[begin:end]``."""
        return begin + gen.integers(0, end - begin - self.seq_len, size=batch_size)  # (B,)

    def _windows(self, start: np.ndarray) -> np.ndarray:
        """The windows of ``seq_len + 1`` that begin at ``start`` (B,)."""
        return self.data[start[:, None] + np.arange(self.seq_len + 1)]  # (B, T+1)

    def _check_parts(self) -> None:
        """Each part holds at least one window of ``seq_len + 1`` (the training part only
        where there is one)."""
        window, n = self.seq_len + 1, len(self.data)
        parts = [("held out", n - self.cut)] + ([("to train on", self.cut)]
                                                 if self.eval_fraction < 1 else [])
        short = [f"{size} {name}" for name, size in parts if size < window]
        if short:
            raise DataError(
                f"{self.path}: {n} characters, of which the last {self.eval_fraction:g} is "
                f"held out: {' and '.join(short)}, but a window of seq_len + 1 = {window} "
                "must fit in each part (a longer text, a shorter seq_len or another "
                "eval_fraction)")


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
