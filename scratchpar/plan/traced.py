"""A layout's memory measured as the training command runs it: the largest rank's peak over a
short run, what the memory estimate (``train.memory.measurable``) predicts, or why the command
refused the layout."""

from __future__ import annotations

import contextlib
import os
import tempfile

from ..comm.agree import RankErrors
from ..peak import peak_bytes
from ..train.build import build_trainer
from ..train.cli import load_config


@contextlib.contextmanager
def refusal(row: dict):
    """Where the training command refuses the layout, the first line of why, in ``row``."""
    try:
        yield
    except RankErrors as e:
        row["not_run"] = str(e).splitlines()[0]


def traced(comm, flags: list[str]) -> int:
    """The largest rank's peak of measured bytes (``scratchpar.peak``: on the CPU arrays and
    Python objects, on a GPU the device's arrays) over the training command's run of ``flags``
    for two steps, from building it to its end (rank 0 gathers the model and evaluates it):
    what the memory estimate predicts for the rank that holds the most
    (``train.memory.measurable``)."""
    with tempfile.TemporaryDirectory(prefix="scratchpar-plan-") as tmp:
        short = ["--steps", "2", "--warmup", "0", "--no-progress",
                 "--metrics", os.path.join(tmp, "metrics.jsonl")]
        cfg = load_config([*flags, *short], world_size=comm.size)
        with peak_bytes() as seen:
            build_trainer(cfg, comm).run()
    return int(max(comm.allgather_obj(seen.bytes, "peak")))
