# mpiexec -n 4 python mpi_examples/02_ring_all_reduce.py
"""A ring all-reduce by hand, printing every message: reduce-scatter, then all-gather.

The buffer is cut into p chunks (one number each here; N/p elements in practice). Rank r starts
with (c+1)·10^r in chunk c, so the digits of a partial sum show which ranks it already holds:
0330 is rank 1's 3 plus rank 2's 3. The steps are those of scratchpar/comm/ring.py, written
with blocking ``sendrecv`` so that each one can be printed (Patarasuk & Yuan 2009).
"""

import sys

import numpy as np

from scratchpar.comm import collectives, reference
from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.mpi import Communicator

MAX_RANKS = 6  # beyond this the numbers get too long to read


def start(rank, p):
    """Rank ``rank``'s buffer: chunk c holds (c+1)·10^rank."""
    return np.arange(1, p + 1, dtype=np.int64) * 10**rank  # (p,)


def ring_all_reduce(comm, x):
    """Sum ``x`` over all ranks in place; return one line per step describing this rank's part."""
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    incoming = np.empty(1, x.dtype)
    digits = f"0{p}d"
    log = []
    for s in range(p - 1):  # reduce-scatter: pass a partial sum on, extend the one that arrives
        out, into = (r - s - 1) % p, (r - s - 2) % p
        comm.sendrecv(x[out:out + 1], right, incoming, left)
        log.append(f"sends chunk {out} ({x[out]:{digits}}) to rank {right}, adds chunk {into} "
                   f"from rank {left}: {x[into]:{digits}} + {incoming[0]:{digits}} = "
                   f"{x[into] + incoming[0]:{digits}}")
        x[into] += incoming[0]
    log.append(state(x, r, digits))  # chunk r is now the sum over all p ranks
    for s in range(p - 1):  # all-gather: pass finished chunks round the ring, received in place
        out, into = (r - s) % p, (r - s - 1) % p
        comm.sendrecv(x[out:out + 1], right, x[into:into + 1], left)
        log.append(f"sends chunk {out} ({x[out]:{digits}}) to rank {right}, receives chunk "
                   f"{into} ({x[into]:{digits}}) from rank {left}")
    log.append(state(x, None, digits))
    return log


def state(x, finished, digits):
    """This rank's buffer, the finished chunk in brackets."""
    return "  ".join(f"[{v:{digits}}]" if c == finished else f" {v:{digits}} "
                     for c, v in enumerate(x)).rstrip()


def print_log(logs, p):
    """Rank 0 prints the gathered logs step by step, rank by rank."""
    titles = ([f"reduce-scatter, step {s + 1} of {p - 1}" for s in range(p - 1)]
              + ["after reduce-scatter: rank r holds the full sum of chunk r (in brackets)"]
              + [f"all-gather, step {s + 1} of {p - 1}" for s in range(p - 1)]
              + ["after all-gather: every rank holds every sum"])
    for i, heading in enumerate(titles):
        print(heading)
        for rank, log in enumerate(logs):
            print(f"  rank {rank}: {log[i]}")
    print(f"each rank sent 2(p-1) = {2 * (p - 1)} chunks of N/p numbers: 2(p-1)/p·N, "
          "less than 2N however many ranks there are")


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    p = comm.size
    if p > MAX_RANKS:
        refuse(comm, f"02_ring_all_reduce.py prints every message; run it on 1 to {MAX_RANKS} "
                     "ranks: mpiexec -n 4 python mpi_examples/02_ring_all_reduce.py")
    x = start(comm.rank, p)
    if comm.rank == 0:
        print(f"ring all-reduce on {p} ranks; digit k from the right is rank k's contribution")
        for rank in range(p):
            print(f"  rank {rank}: {state(start(rank, p), None, f'0{p}d')}")
    logs = comm.allgather_obj(ring_all_reduce(comm, x))
    expected = reference.all_reduce([start(rank, p) for rank in range(p)])[comm.rank]
    library = collectives.all_reduce(comm, start(comm.rank, p), algorithm="ring")
    agree = comm.allgather_obj(np.array_equal(x, library) and np.array_equal(x, expected))
    if comm.rank == 0:
        print_log(logs, p)
        bad = [r for r, good in enumerate(agree) if not good]
        print("same as collectives.all_reduce(algorithm='ring') and reference.all_reduce: "
              f"{'yes, on every rank' if not bad else f'NO, on ranks {bad}'}", flush=True)
    if not all(agree):
        sys.exit(1)


if __name__ == "__main__":
    main()
