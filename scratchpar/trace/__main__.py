"""``python -m scratchpar.trace {loss,collectives,scaling,plot,pipeline} FILE -o OUT.png``: loss,
all-reduce, data-parallel scaling, timeline or pipeline-stage plots; ``python -m
scratchpar.trace exposed TRACE.json``: exposed communication."""

from __future__ import annotations

import argparse
import sys

from ..bench.collectives.plot import plot_collectives
from ..bench.dp.plot import plot_scaling
from .exposure import report
from .loss_plot import plot_loss
from .pipeline_plot import plot_trace_stages
from .timeline_plot import plot_timeline

PLOTS = [  # (command, drawing function, what it draws, its input, default PNG)
    ("loss", plot_loss, "loss curve and entropy floor from a metrics file",
     ("METRICS", "the JSONL metrics file written by scratchpar.train"), "loss.png"),
    ("collectives", plot_collectives, "all-reduce algorithms vs MPI from a benchmark JSON",
     ("BENCH", "the JSON of python -m scratchpar.bench collectives --json"), "collectives.png"),
    ("scaling", plot_scaling, "DP efficiency vs per-rank batch from a benchmark JSON",
     ("BENCH", "the JSON of python -m scratchpar.bench dp --json"), "dp_scaling.png"),
    ("plot", plot_timeline, "per-rank compute/communication timeline of a trace",
     ("TRACE", "the Chrome trace JSON written by scratchpar.train --trace"), "timeline.png"),
    ("pipeline", plot_trace_stages, "each stage's forwards and backwards in a pipeline's trace",
     ("TRACE", "the Chrome trace JSON of scratchpar.train --strategy pipeline --trace"),
     "pipeline.png"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scratchpar.trace")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, draw, what, (metavar, source), default in PLOTS:
        cmd = sub.add_parser(name, help=what)
        cmd.add_argument("input", metavar=metavar, help=source)
        cmd.add_argument("-o", "--out", default=default, help="PNG to write")
        cmd.set_defaults(run=lambda a, draw=draw: f"wrote {draw(a.input, a.out)}")
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
