"""The bytes of a run's data source, from its Config alone: what each dense source builds,
keeps, and draws (the classifier's teacher, a synthetic language's table, a text's characters)."""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

from ..data.synthetic import table_fits
from .memory_models import F64, I64, GiB, MiB

CODE_POINTS = 0x110000  # distinct characters a text can hold at most
SCAN_LIMIT = GiB  # a text file up to this size is read (in chunks) to count its characters
HUGE = 1 << 4096  # stands in for a table too large to compute: V**(order+1) with a large order
TEACHER, CALIBRATION = 64, 4096  # SyntheticClassification's hidden width and calibration sample


class Source(NamedTuple):
    """A data source's vocabulary, and bytes: its peak while built (entropy floor included),
    what it keeps, the batches a run holds and draws, and the temporaries of drawing one,
    which are gone before the step that uses it allocates anything (its own moment)."""

    vocab: int
    built: int
    kept: int
    batches: int
    drawing: int = 0


def dense_source(cfg) -> Source:
    d, b, t = cfg.data, cfg.train.batch_size, cfg.data.seq_len
    if d.source == "classification":
        f, k = d.n_features, d.n_classes
        # the teacher's calibration sample, its hidden layer and two temporaries; its weights
        built = F64 * (CALIBRATION * (f + 3 * TEACHER + k) + TEACHER * (f + k))
        batch = 4 * f + I64  # float32 inputs and int64 labels
        labels = F64 * (f + 2 * TEACHER + 2 * k) + 2 * I64  # the teacher labels in float64
        # a step holds its batch; drawing one computes its labels while the last batch is
        # still held (the evaluation's loop): two batches and the labels' temporaries
        return Source(0, built, F64 * TEACHER * (f + k + 2), b * batch, b * (batch + labels))
    # the step's batch stays alive while evaluation draws one: ids and uniforms, or indices
    batches = b * (3 * I64 * (t + 1) + F64 * t)
    if d.source == "text":
        size = file_size(d.path)
        v = _text_vocab(d.path, size)
        # reading holds the bytes and a str of ≤ 4 bytes per character, then the str and the
        # int32 ids, which stay; a character's index and set entries
        return Source(v, 8 * size + 256 * v, 4 * size + 256 * v, batches)
    v = d.vocab_size
    contexts = _power(v, d.order)
    table = F64 * contexts * v
    # the table and its CDF stay; building them holds three at once, the entropy floor six
    # and four vectors over the contexts; each position of a batch reads rows of the CDF
    return Source(v, 6 * table + 4 * F64 * contexts, 2 * table, batches + b * (F64 + 1) * v)


def planned(cfg, source: Source) -> Source:
    """``source`` as a plan prices it: a synthetic language too large to tabulate, which only
    a plan accepts (a real vocabulary, ``validate.py``), as a tokenized corpus read as it is
    drawn, its batches alone."""
    d = cfg.data
    if d.source == "synthetic" and not table_fits(d.vocab_size, d.order):
        return Source(source.vocab, 0, 0, source.batches)
    return source


def _power(base: int, exponent: int) -> int:
    """``base ** exponent``, or HUGE where that would be too large to compute."""
    if exponent * max(base, 1).bit_length() > HUGE.bit_length():
        return HUGE
    return max(base, 0) ** max(exponent, 0)


def file_size(path) -> int:
    try:
        return os.stat(path).st_size if path is not None else 0
    except OSError:  # missing or unreadable: another check reports it
        return 0


def _text_vocab(path, size: int) -> int:
    """PAD plus the distinct characters of a UTF-8 file, read 1 MiB at a time (up to
    SCAN_LIMIT bytes; a larger file may hold any character); counted once per file version,
    however many layouts a plan weighs."""
    if path is None or not os.path.isfile(path):  # another check reports it
        return 1
    if size > SCAN_LIMIT:
        return CODE_POINTS + 1
    return _scanned(os.path.realpath(path), size, os.stat(path).st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _scanned(path: str, size: int, modified: int) -> int:
    seen: set[str] = set()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            while chunk := f.read(MiB):
                seen.update(chunk)
    except OSError:  # unreadable: another check reports it
        return 1
    return len(seen) + 1


