"""``python -m scratchpar.evaluate CKPT [--data PATH]``: a checkpoint's held-out loss.

The model comes back from the checkpoint alone (``train/trained.py``) and is scored on the
held-out batches of its own data, the ones the training run's final line was scored on (a
text's held-out last part, ``--eval-fraction``, which the run never trained on), or on windows
from the whole of another text file, read with the model's vocabulary. The loss is in nats
per token or sample, and in bits per character for text; a classifier's accuracy is beside it.
"""

from __future__ import annotations

import argparse
import json
import sys

from .backend import DEVICES
from .train.trained import LOAD_ERRORS, load_trained

EXIT_BAD_INPUT, EXIT_INTERRUPTED = 2, 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scratchpar.evaluate",
        description="The held-out loss of a checkpoint (--save DIR of python -m "
                    "scratchpar.train), on its own data or on another text file.")
    parser.add_argument("checkpoint", metavar="CKPT", help="the checkpoint's directory")
    parser.add_argument("--data", metavar="PATH", help="a text file to score the model on, "
                        "read with the model's own characters (a model trained on text): all "
                        "of it, or, for the file it trained on, its held-out part")
    parser.add_argument("--batches", type=int, help="held-out batches (default: the run's "
                        "--eval-batches)")
    parser.add_argument("--batch-size", type=int, help="sequences or samples per batch "
                        "(default: the run's)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where the model runs (cpu)")
    return parser


def evaluate(trained, batches: int, batch_size: int) -> dict:
    """The figures of ``trained`` on ``batches`` held-out batches of ``batch_size``."""
    task = trained.task
    return {"checkpoint": trained.directory, "step": trained.step,
            "data": trained.cfg.data.path or trained.cfg.data.source,
            "batches": batches, "batch_size": batch_size, "unit": task.unit,
            "measure": task.measure, **task.scores(batches, batch_size)}


def line(r: dict) -> str:
    """The figures as one line, the way the training run's final line says them."""
    unit = "token" if r["unit"] == "tok" else "sample"
    text = (f"{r['checkpoint']} (step {r['step']}) on {r['data']}: held-out loss "
            f"{r['loss']:.4f} " + (f"nats/{unit}" if r["measure"] == "nats"
                                   else f"({r['measure']} per {unit})"))
    if r["bits_per_char"] is not None:
        text += f" = {r['bits_per_char']:.4f} bits/char"
    if r["floor"] is not None:
        text += f" · floor {r['floor']:.4f} · gap {r['gap']:+.4f}"
    if r["accuracy"] is not None:
        text += f" · accuracy {100 * r['accuracy']:.1f}%"
    return text + f" · {r['batches']} batches of {r['batch_size']}"


def main(argv: list[str] | None = None) -> int:
    """Exit status 0; 2 for a bad flag, checkpoint, data file or device; 130 when
    interrupted."""
    args = build_parser().parse_args(argv)
    try:
        for flag, value in (("--batches", args.batches), ("--batch-size", args.batch_size)):
            if value is not None and value < 1:
                raise ValueError(f"{flag} must be at least 1, got {value}")
        trained = load_trained(args.checkpoint, args.device, args.data)
        t = trained.cfg.train
        result = evaluate(trained, args.batches or t.eval_batches,
                          args.batch_size or t.batch_size)
    except (ValueError, *LOAD_ERRORS) as e:
        print(f"scratchpar.evaluate: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("scratchpar.evaluate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(json.dumps(result) if args.json else line(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
