# mpiexec -n 4 python mpi_examples/03_collectives_tour.py
"""A tour of the collectives on small integer arrays, each checked against comm/reference.py.

Every rank builds its input from its rank number, so every rank can also build every other rank's
input and ask the reference (plain NumPy over a list of per-rank blocks) what it should get back.
Blocks are split and joined along axis 0, and the row counts need not divide evenly.
"""

import sys

import numpy as np

from scratchpar.comm import collectives, reference
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.chunks import counts
from scratchpar.comm.mpi import Communicator


def ramp(r):
    """Rank r's input to the reductions: [r, r+1, …, r+4]."""
    return np.arange(5, dtype=np.int64) + r  # (5,)


def rows_of(r):
    """Rank r's input to the gathers: r+1 rows, [10r, 10r+1, …]."""
    return np.arange(r + 1, dtype=np.int64) + 10 * r  # (r+1,)


def tour(comm, heading, inputs, run, expect):
    """Run one collective on every rank, print each rank's input → output, check the reference.

    ``inputs(r)`` is rank r's input, ``run(x)`` calls the collective on this rank's input,
    ``expect(blocks)`` asks the reference for every rank's output.
    """
    x = inputs(comm.rank)
    shown_in = _show(x)  # before the call: broadcast_ overwrites its input
    got = run(x)
    want = expect([inputs(r) for r in range(comm.size)])[comm.rank]
    ok = np.array_equal(got, want) if want is not None else got is None
    rows = comm.allgather_obj((shown_in, _show(got), ok))
    if comm.rank == 0:
        print(f"\n{heading}")
        for r, (shown_in, shown_out, _) in enumerate(rows):
            print(f"  rank {r}: {shown_in:>18}  →  {shown_out}")
        bad = [r for r, (_, _, good) in enumerate(rows) if not good]
        print(f"  {'matches the reference' if not bad else f'MISMATCH on ranks {bad}'}",
              flush=True)
    return all(good for _, _, good in rows)


def _show(x):
    return "None" if x is None else str(x.tolist())


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    p, last = comm.size, comm.size - 1
    ok = [
        tour(comm, f"broadcast_ from rank {last} (binomial tree, comm/tree.py): every rank "
                   "gets the root's array",
             lambda r: np.full(3, 7 if r == last else 0, np.int64),
             lambda x: collectives.broadcast_(comm, x, root=last),
             lambda blocks: reference.broadcast(blocks, root=last)),
        tour(comm, "reduce, sum, to rank 0 (binomial tree, comm/tree.py): only the root gets "
                   "the sum",
             ramp, lambda x: collectives.reduce(comm, x, "sum", root=0),
             lambda blocks: reference.reduce(blocks, "sum", root=0)),
        tour(comm, "all_reduce, max (recursive doubling for small arrays, comm/doubling.py): "
                   "every rank gets it",
             ramp, lambda x: collectives.all_reduce(comm, x, "max"),
             lambda blocks: reference.all_reduce(blocks, "max")),
        tour(comm, f"reduce_scatter, sum (ring, comm/ring.py): 5 rows of the sum split "
                   f"{counts(5, p)} over the ranks",
             ramp, lambda x: collectives.reduce_scatter(comm, x, "sum"),
             lambda blocks: reference.reduce_scatter(blocks, "sum")),
        tour(comm, "all_gather (ring, comm/ring.py): rank r brings r+1 rows; every rank gets "
                   "them all, in rank order",
             rows_of, lambda x: collectives.all_gather(comm, x), reference.all_gather),
        tour(comm, f"gather to rank {last} (direct messages, comm/direct.py): the same rows, "
                   "on the root only",
             rows_of, lambda x: collectives.gather(comm, x, root=last),
             lambda blocks: reference.gather(blocks, root=last)),
        tour(comm, "scatter from rank 0 (direct messages, comm/direct.py): rank r gets its "
                   "share of the root's 10 rows",
             lambda r: np.arange(10, dtype=np.int64) if r == 0 else None,
             lambda x: collectives.scatter(comm, x, root=0),
             lambda blocks: reference.scatter(blocks, root=0)),
    ]
    if not all(ok):
        sys.exit(1)


if __name__ == "__main__":
    main()
