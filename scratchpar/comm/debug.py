"""Debug mode (``SCRATCHPAR_DEBUG=1``): before each collective, all ranks compare their calls.

MPI trusts every rank to call the same collective on matching buffers. A mismatch hangs, or
worse, succeeds: MPI all-gathers 10 float64 against 20 float32 without complaint, since the byte
counts agree. Here each rank first shares a signature (operation, algorithm, shape, dtype, op,
root), and any disagreement raises :class:`CollectiveMismatch` on every rank, naming each call.
"""

from __future__ import annotations

from scratchpar.comm.errors import CollectiveMismatch


def check(comm, signature: dict) -> None:
    """Raise on every rank unless all ranks passed an equal ``signature``."""
    seen = comm.allgather_obj(signature)
    if any(s != seen[0] for s in seen):
        calls = "\n".join(f"  rank {i}: {_show(s)}" for i, s in enumerate(seen))
        raise CollectiveMismatch(f"ranks of {comm.name} called different collectives:\n{calls}")


def _show(signature: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in signature.items())
