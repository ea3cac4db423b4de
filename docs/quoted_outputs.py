"""The outputs that README.md and the docs quote, from the commands that print them.

    python docs/quoted_outputs.py --write   run every command and rewrite its quoted block
    python docs/quoted_outputs.py --check   run every command and fail where a block differs

A quoted block follows a ``<!-- output: NAME -->`` line: a fenced block of ``$ command`` lines,
each followed by what it printed. The commands run as a user types them from the repository
root, in a scratch folder (the package and its corpus linked in), with this Python's
``python`` and ``mpiexec`` first on the PATH, in the environment every job of the project gets
(``jobs/launcher.py``); what they print is read less the MPI launcher's own lines. What
changes from run to run or from machine to machine (throughput, seconds, the memory a node
has) is masked when blocks are compared, and a run's final losses may differ by a unit in their
last place (another CPU's rounding), so that a check fails only where the engine now says
something else. The tests run ``--check``
(``tests/launch/test_launch_quoted_outputs.py``); ``make docs`` runs ``--write``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from scratchpar.jobs.launcher import mpi_env, own_lines

ROOT = Path(__file__).resolve().parents[1]
CORPUS = "scratchpar/data/corpora/shakespeare.txt"
VOLATILE = [r"[\d,]+ (tok|sample)/s", r"\([\d,]+ per (rank|worker) × [^)]*\)",
            r"\d+ steps in [\d.]+ s", r"[\d,.]+ GiB is available \([\d,.]+ GiB on this node[^)]*\)",
            r"\d+ tokens in [\d.]+ s \([\d,]+ tokens/s\)"]
# The figures a training run ends on, said to 4 decimals. Another CPU's BLAS kernel rounds each
# product differently, and over 1500 steps that moves them by a unit in the last place (the
# 4-rank run's held-out loss is 1.9415 under OpenBLAS's Haswell kernel, 1.9414 under its
# Prescott one): they are compared to within that unit.
LAST_PLACE = re.compile(r"(?<=held-out loss )[\d.]+|(?<=gap )[+-][\d.]+|[\d.]+(?= bits/char)")


@dataclass(frozen=True)
class Quote:
    """Commands shown in ``doc`` after ``<!-- output: name -->``, each with what it printed on
    ``stream``; ``setup`` runs first, unshown."""

    doc: str
    name: str
    commands: list[str]
    stream: str = "stdout"
    setup: list[str] = field(default_factory=list)


EDIT_STREAM = ("python -c \"import json; p = 'ck/meta.json'; m = json.load(open(p)); "
               "m['dropout_rng'][1] = 'x'; json.dump(m, open(p, 'w'))\"")
GPT = ("--model gpt --d-model 2048 --n-layers 20 --n-heads 16 --seq-len 1024 --vocab-size 51200 "
       "--batch-size 128 --precision bf16")
QUOTES = [
    Quote("README.md", "four-ranks", ["mpiexec -n 4 python -m scratchpar.train"]),
    Quote("README.md", "shakespeare",
          [f"mpiexec -n 2 python -m scratchpar.train --data {CORPUS} --steps 600 "
           "--save runs/shakespeare",
           "python -m scratchpar.evaluate runs/shakespeare",
           "python -m scratchpar.sample runs/shakespeare --prompt 'KING RICHARD' --tokens 120 "
           "--temperature 0.8"]),
    Quote("docs/failures.md", "agreement", ["mpiexec -n 3 python -m scratchpar.train --resume ck"],
          "stderr", ["mpiexec -n 3 python -m scratchpar.train --steps 2 --save ck --no-progress",
                     EDIT_STREAM]),
    Quote("docs/failures.md", "memory",
          ["mpiexec -n 2 python -m scratchpar.train --n-layers 100000"], "stderr"),
    Quote("docs/failures.md", "divergence", ["python -m scratchpar.train --lr 1e6 --warmup 0"],
          "stderr"),
    Quote("docs/checkpoints.md", "checkpoint-info",
          ["mpiexec -n 4 python -m scratchpar.train --strategy zero --zero-stage 3 --steps 3 "
           "--save runs/zero3", "python -m scratchpar.checkpoint info runs/zero3"]),
    Quote("docs/plan.md", "plan-rank", [f"python -m scratchpar.plan --world 64 --top 8 -- {GPT}"]),
    Quote("docs/plan.md", "plan-explain",
          [f"python -m scratchpar.plan --world 64 --explain 1 -- {GPT}"]),
    Quote("docs/plan.md", "plan-target",
          [f"python -m scratchpar.plan --world 64 --target 69,2939 -- {GPT}"]),
]


def run(quote: Quote) -> str:
    """The block's text: each command after ``$``, then what it printed."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, **mpi_env(), "PATH": f"{bin_dir}{os.pathsep}"
           f"{os.environ.get('PATH', '')}"}
    lines = []
    with tempfile.TemporaryDirectory(prefix="scratchpar-quotes-") as tmp:
        (Path(tmp) / "scratchpar").symlink_to(ROOT / "scratchpar")
        env["PYTHONPATH"] = tmp
        for command in quote.setup + quote.commands:
            done = subprocess.run(["bash", "-c", command], cwd=tmp, env=env,
                                  capture_output=True, text=True, timeout=600)
            if command in quote.commands:
                shown = own_lines(done.stdout if quote.stream == "stdout" else done.stderr)
                lines += [f"$ {command}", *shown.rstrip("\n").splitlines()]
            elif done.returncode != 0:
                raise RuntimeError(f"{command}: exit {done.returncode}\n{done.stderr}")
    return "\n".join(lines)


def block(text: str, name: str) -> re.Match:
    match = re.search(rf"<!-- output: {name} -->\n```\n((?:(?!```).)*?)\n?```", text, re.DOTALL)
    if match is None:
        raise LookupError(f"no quoted block named {name}")
    return match


def masked(text: str) -> str:
    for pattern in VOLATILE:
        text = re.sub(pattern, "…", text)
    return text


def same(quoted: str, now: str) -> bool:
    """Whether ``now`` says what ``quoted`` says: the same text but for what is volatile, and
    each of the run's final figures within a unit in its last place."""
    figures = [LAST_PLACE.findall(masked(text)) for text in (quoted, now)]
    return (LAST_PLACE.sub("#", masked(quoted)) == LAST_PLACE.sub("#", masked(now))
            and all(abs(float(a) - float(b)) <= 1.01 * 10.0 ** -len(a.partition(".")[2])
                    for a, b in zip(*figures)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite every quoted block")
    mode.add_argument("--check", action="store_true", help="fail where a block differs")
    parser.add_argument("--only", help="the quotes named here, comma-separated")
    args = parser.parse_args(argv)
    stale = []
    for quote in QUOTES:
        if args.only and quote.name not in args.only.split(","):
            continue
        path = ROOT / quote.doc
        text, now = path.read_text(), run(quote)
        found = block(text, quote.name)
        if args.write:
            path.write_text(f"{text[:found.start()]}<!-- output: {quote.name} -->\n```\n{now}\n```"
                            f"{text[found.end():]}")
        elif not same(found[1], now):
            stale.append(f"{quote.doc}, {quote.name}: quoted\n{found[1]}\nnow prints\n{now}")
    print("\n\n".join(stale) or "every quoted output is what its commands print")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
