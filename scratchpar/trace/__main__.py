"""``python -m scratchpar.trace {loss,collectives,scaling,plot} FILE -o OUT.png``: loss,
all-reduce, data-parallel scaling or timeline plots; ``python -m scratchpar.trace exposed
TRACE.json``: exposed communication."""

from __future__ import annotations

import argparse
import sys

from .collectives_plot import plot_collectives
from .exposure import report
from .loss_plot import plot_loss
from .scaling_plot import plot_scaling
from .timeline_plot import plot_timeline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scratchpar.trace")
    sub = parser.add_subparsers(dest="command", required=True)
    loss = sub.add_parser("loss", help="loss curve and entropy floor from a metrics file")
    loss.add_argument("metrics", help="JSONL metrics file written by scratchpar.train")
    loss.add_argument("-o", "--out", default="loss.png", help="PNG to write")
    loss.set_defaults(run=lambda a: f"wrote {plot_loss(a.metrics, a.out)}")
    coll = sub.add_parser("collectives", help="all-reduce algorithms vs MPI from a benchmark JSON")
    coll.add_argument("bench", help="JSON written by python -m scratchpar.bench collectives --json")
    coll.add_argument("-o", "--out", default="collectives.png", help="PNG to write")
    coll.set_defaults(run=lambda a: f"wrote {plot_collectives(a.bench, a.out)}")
    scal = sub.add_parser("scaling", help="DP efficiency vs per-rank batch from a benchmark JSON")
    scal.add_argument("bench", help="JSON written by python -m scratchpar.bench dp --json")
    scal.add_argument("-o", "--out", default="dp_scaling.png", help="PNG to write")
    scal.set_defaults(run=lambda a: f"wrote {plot_scaling(a.bench, a.out)}")
    plot = sub.add_parser("plot", help="per-rank compute/communication timeline of a trace")
    plot.add_argument("trace", help="Chrome trace JSON written by scratchpar.train --trace")
    plot.add_argument("-o", "--out", default="timeline.png", help="PNG to write")
    plot.set_defaults(run=lambda a: f"wrote {plot_timeline(a.trace, a.out)}")
    expo = sub.add_parser("exposed", help="per rank: communication not hidden behind compute")
    expo.add_argument("trace", help="Chrome trace JSON written by scratchpar.train --trace")
    expo.set_defaults(run=lambda a: report(a.trace))
    args = parser.parse_args(argv)
    try:
        print(args.run(args))
    except ImportError:
        print("plotting needs matplotlib: pip install 'scratchpar[plot]'", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"scratchpar.trace: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
