"""``python -m scratchpar.trace loss METRICS.jsonl -o loss.png``: draw pictures of a run."""

from __future__ import annotations

import argparse
import sys

from .loss_plot import plot_loss


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scratchpar.trace")
    sub = parser.add_subparsers(dest="command", required=True)
    loss = sub.add_parser("loss", help="loss curve and entropy floor from a metrics file")
    loss.add_argument("metrics", help="JSONL metrics file written by scratchpar.train")
    loss.add_argument("-o", "--out", default="loss.png", help="PNG to write")
    args = parser.parse_args(argv)
    try:
        print(f"wrote {plot_loss(args.metrics, args.out)}")
    except ImportError:
        print("plotting needs matplotlib: pip install 'scratchpar[plot]'", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"scratchpar.trace: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
