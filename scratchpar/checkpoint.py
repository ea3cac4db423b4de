"""``python -m scratchpar.checkpoint info|consolidate DIR``: what a checkpoint holds, and a
whole copy of it in the single-file format, on one machine.

A run saves in pieces, each rank its own (``train/sharded.py``). ``info`` says what the index
lists: the run, each part's arrays and bytes, and each rank's file (``--verify`` also reads
every piece and checks it). ``consolidate DIR OUT`` writes the same state, every array whole,
as ``model.npz`` and ``optim.npz``: what a reader without scratchpar can open with NumPy.
Both refuse a checkpoint that is missing, malformed or corrupt with one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from .table import table
from .train.checkpoint import CheckpointError, save_checkpoint
from .train.precision import AtPrecision
from .train.stored import open_checkpoint

EXIT_BAD_INPUT = 2
INDEX_KEYS = ("format", "scalars", "arrays", "sha256")  # the format's own, not the run's
PARTS = {"part": "part", "arrays": "arrays", "elements": "elements"}


def megabytes(row: dict) -> float:
    return row["bytes"] / 1e6


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scratchpar.checkpoint",
                                     description="What a checkpoint (--save DIR of python -m "
                                                 "scratchpar.train) holds, or a whole copy.")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="the run, its parts and each rank's file")
    info.add_argument("directory", metavar="DIR")
    info.add_argument("--verify", action="store_true", help="read every piece and check it")
    info.add_argument("--json", action="store_true", help="print the figures as JSON")
    whole = sub.add_parser("consolidate", help="every array whole, in the single-file format")
    whole.add_argument("directory", metavar="DIR")
    whole.add_argument("out", metavar="OUT", help="where the copy goes (replaced if there)")
    return parser


def describe(stored) -> dict:
    """The run and the state a checkpoint holds: per part its arrays, elements and bytes, per
    file its pieces and bytes (the single-file format names one file per part)."""
    meta, parts, files = stored.meta, [], {}
    for part in stored.parts():
        arrays = [stored.arrays[part][name] for name in stored.names(part)]
        parts.append({"part": part, "arrays": len(arrays),
                      "elements": sum(math.prod(a.shape) for a in arrays),
                      "bytes": sum(math.prod(a.shape) * np.dtype(_dtype(a.dtype)).itemsize
                                   for a in arrays)})
        for name in stored.names(part):
            for p in meta.get("arrays", {}).get(part, {}).get(name, {}).get("pieces", []):
                held = files.setdefault(p["file"], {"file": p["file"], "pieces": 0, "bytes": 0})
                held["pieces"] += 1
                held["bytes"] += math.prod(p["shape"]) * np.dtype(
                    _dtype(stored.arrays[part][name].dtype)).itemsize
    train = meta.get("config", {}).get("train", {})
    return {"directory": stored.directory, "format": meta.get("format", "single-file"),
            "step": meta.get("step"), "strategy": train.get("strategy"),
            "ranks": len(meta.get("dropout_rng", [])), "parts": parts,
            "files": sorted(files.values(), key=lambda f: int(f["file"][4:].split(".")[0]))}


def _dtype(name: str) -> str:
    return "uint16" if name == "bfloat16" else name  # bfloat16's bytes, as NumPy sizes them


def consolidate(stored, out: str) -> None:
    """Every array of ``stored`` whole, written to ``out`` in the single-file format, which
    holds a 16-bit run's fp32 masters as its weights (its earlier runs' form, read at any
    precision) and bfloat16, which NumPy's files cannot name, as the fp32 it widens to."""
    names = stored.meta.get("parameters")
    seen = AtPrecision(stored, names, sixteen=False) if isinstance(names, list) else stored
    arrays = {part: {name: _widened(seen.read(part, name)) for name in seen.names(part)}
              for part in seen.parts()}
    meta = {k: v for k, v in stored.meta.items() if k not in INDEX_KEYS}
    save_checkpoint(out, arrays, {**meta, **{part: seen.scalars(part) for part in arrays}})


def _widened(array: np.ndarray) -> np.ndarray:
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


def main(argv: list[str] | None = None) -> int:
    """Exit status 0; 2 for a checkpoint that cannot be read."""
    args = build_parser().parse_args(argv)
    try:
        with open_checkpoint(args.directory) as stored:
            if args.command == "consolidate":
                if Path(args.out).resolve() == Path(args.directory).resolve():
                    raise CheckpointError(f"{args.out} is the checkpoint itself")
                consolidate(stored, args.out)
                print(f"{args.directory} → {args.out}: every array whole "
                      "(model.npz, optim.npz, meta.json)")
                return 0
            if args.verify:
                for part in stored.parts():
                    for name in stored.names(part):
                        stored.read(part, name)
            about = describe(stored)
    except (CheckpointError, OSError, ValueError) as e:
        print(f"scratchpar.checkpoint: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(about))
        return 0
    print(f"{about['directory']}: {about['format']} checkpoint at step {about['step']}, "
          f"a {about['strategy']} run on {about['ranks']} ranks"
          + (" · every piece read and checked" if args.verify else ""))
    print(table("parts", about["parts"], {**PARTS, "MB": megabytes}, {"MB": ".3f"}))
    if about["files"]:
        print(table("files, one per rank that held part of the state", about["files"],
                    {"file": "file", "pieces": "pieces", "MB": megabytes}, {"MB": ".3f"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
