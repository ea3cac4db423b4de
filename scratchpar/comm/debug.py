"""Debug mode (``SCRATCHPAR_DEBUG=1``): before each collective, all ranks compare their calls.

MPI trusts every rank to call the same collective on matching buffers. A mismatch hangs, or
worse, succeeds: MPI all-gathers 10 float64 against 20 float32 without complaint, since the byte
counts agree. Here each rank first shares a signature (operation, algorithm, shape, dtype, op,
root), and any disagreement raises :class:`CollectiveMismatch` on every rank, naming each call.

The check is itself an exchange of metadata (``Communicator.allgather_obj``), labelled by the
call. All exchanges share one channel, so a rank checking one call always meets the other ranks'
next check, barrier or metadata exchange, never a hang. Differing labels raise on every rank.
"""

from __future__ import annotations

from scratchpar.comm.errors import CollectiveMismatch


def check(comm, signature: dict) -> None:
    """Raise :class:`CollectiveMismatch` on every rank unless all ranks passed an equal
    ``signature`` (``{"collective": name, **arguments}``; ``None`` arguments are left out):
    the check is a labelled metadata exchange, which runs :func:`compare` on every rank."""
    comm.allgather_obj(None, what=f"debug check of {describe(signature)}")


def check_call(comm, name: str, algorithm: str, x, *, op: str | None, root: int | None,
               shape) -> None:
    """:func:`check` of a collective's call: its algorithm, op and root, and ``x``'s dtype and
    shape (``shape`` instead where ranks' row counts may differ: the rows they join)."""
    signature = {"collective": name, "algorithm": algorithm, "op": op, "root": root}
    if x is not None:
        signature["shape"] = tuple(x.shape) if shape is None else tuple(shape)
        signature["dtype"] = str(x.dtype)
    check(comm, signature)


def compare(comm_name: str, calls: list[str]) -> None:
    """Raise :class:`CollectiveMismatch` unless every rank's call (``calls[rank]``) is equal."""
    if any(call != calls[0] for call in calls):
        lines = "\n".join(f"  rank {rank}: {call}" for rank, call in enumerate(calls))
        raise CollectiveMismatch(
            f"ranks of {comm_name} called different operations:\n{lines}\nEvery rank must call "
            "the same collectives in the same order, on the same shapes and dtypes.")


def describe(signature: dict) -> str:
    """``all_gather(algorithm=ring, shape=(), dtype=float64)``."""
    args = ", ".join(f"{k}={v}" for k, v in signature.items()
                     if k != "collective" and v is not None)
    return f"{signature['collective']}({args})"
