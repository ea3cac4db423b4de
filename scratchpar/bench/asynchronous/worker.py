"""One rank of the asynchronous benchmark: the Hogwild, τ or round-robin part."""

from __future__ import annotations

import sys

from ..worker import serve
from .hogwild import hogwild_part
from .round_robin import round_robin_part
from .tau import tau_part

PARTS = {"hogwild": hogwild_part, "tau": tau_part, "round_robin": round_robin_part}

if __name__ == "__main__":
    sys.exit(serve(lambda comm, cfg: PARTS[cfg["part"]](comm, cfg)))
