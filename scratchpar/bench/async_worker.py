"""One rank of the asynchronous benchmark: one part of it, chosen by its JSON config.

Run by ``python -m scratchpar.bench async`` under ``mpiexec -n N``; not meant to be called by
hand.

- ``hogwild``: serial SGD, Hogwild at 1 … N processes and the locked variant, in turns on the
  same samples of each problem; then lock-free Hogwild counts its colliding writes
  (scratchpar/bench/async_hogwild.py).
- ``tau``: asynchronous EASGD against Downpour at each communication period τ
  (scratchpar/bench/async_tau.py).
- ``round_robin``: round-robin EASGD's master, its time split, at each worker count G
  (scratchpar/bench/async_round_robin.py).
"""

from __future__ import annotations

import sys

from scratchpar.bench import worker
from scratchpar.bench.async_hogwild import hogwild_part
from scratchpar.bench.async_round_robin import round_robin_part
from scratchpar.bench.async_tau import tau_part
from scratchpar.bench.mpijob import write_result

CONFIG_HELP = ('"part": hogwild | tau | round_robin, and that part\'s settings (see '
               'scratchpar/bench/asynchronous.py)')
PARTS = {"hogwild": hogwild_part, "tau": tau_part, "round_robin": round_robin_part}


def main(argv=None) -> int:
    args, comm, cfg = worker.start(__doc__, CONFIG_HELP, argv)
    return write_result(comm, args.out, PARTS[cfg["part"]](comm, cfg))


if __name__ == "__main__":
    sys.exit(main())
