# mpiexec -n 4 python mpi_examples/01_point_to_point.py
"""Point-to-point messages: send/recv, isend/irecv, sendrecv, and why a ring needs the last two.

Arrays travel through MPI's buffer interface: the receiver allocates an array of the right shape
and dtype and MPI copies the bytes into it (nothing is pickled). Every rank runs this same file;
``comm.rank`` decides what each one does.
"""

import time

import numpy as np

from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.mpi import Communicator

BIG = 1 << 19  # float64 elements: 4 MiB, far above any eager limit
SMALL = 5  # float64 elements: 40 bytes


def show(comm, line):
    """Print one line per rank, in rank order, from rank 0 (``None``: this rank has nothing)."""
    lines = comm.allgather_obj(line)
    if comm.rank == 0:
        print("\n".join(f"  {text}" for text in lines if text is not None), flush=True)


def title(comm, text):
    if comm.rank == 0:
        print(f"\n{text}", flush=True)


def blocking(comm):
    title(comm, "1. send / recv: rank 0 sends an array to rank 1; the receiver allocates it")
    line = None
    if comm.rank == 0:
        data = np.arange(SMALL, dtype=np.float64)  # (5,)
        comm.send(data, dest=1)  # returns once MPI no longer needs data
        line = f"rank 0 sent {data}"
    elif comm.rank == 1:
        got = np.empty(SMALL, np.float64)  # shape and dtype agreed in advance
        comm.recv(got, source=0)
        line = f"rank 1 received {got}"
    show(comm, line)


def nonblocking_ring(comm):
    title(comm, "2. isend / irecv: every rank passes its number to the right, all at once")
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    mine, got = np.array([comm.rank], np.int64), np.empty(1, np.int64)
    requests = [comm.irecv(got, left), comm.isend(mine, right)]  # both posted, nothing waits
    comm.wait_all(requests)
    show(comm, f"rank {comm.rank} got {got[0]} from rank {left}")

    title(comm, "3. sendrecv: the same shift in one call (receive posted, then send, then wait)")
    comm.sendrecv(mine * 10, right, got, left)
    show(comm, f"rank {comm.rank} got {got[0]} from rank {left}")


def two_sends(comm):
    title(comm, "4. why not two blocking sends: ranks 0 and 1 both send before either receives")
    line = None
    if comm.rank < 2:
        other = 1 - comm.rank
        small, big = np.full(SMALL, comm.rank, np.float64), np.full(BIG, comm.rank, np.float64)
        sends = {"small (40 B)": comm.isend(small, other, tag=1),
                 "large (4 MiB)": comm.isend(big, other, tag=2)}
        done = dict.fromkeys(sends, False)
        deadline = time.perf_counter() + 0.5
        while time.perf_counter() < deadline and not all(done.values()):
            done = {name: done[name] or comm.test_all([req]) for name, req in sends.items()}
            time.sleep(1e-3)
        status = ", ".join(f"{name} {'done' if d else 'still waiting'}" for name, d in done.items())
        small_in, big_in = np.empty(SMALL), np.empty(BIG)
        comm.wait_all([comm.irecv(small_in, other, tag=1), comm.irecv(big_in, other, tag=2),
                       *sends.values()])
        line = f"rank {comm.rank}, 0.5 s before any receive: {status}; after the receives: all done"
    show(comm, line)
    if comm.rank == 0:
        print("  A small message is copied into MPI's own buffer (eager), so its send finishes at\n"
              "  once. A large one waits until the receiver has posted its receive (rendezvous).\n"
              "  comm.send is isend + wait: if both ranks call comm.send with a large message,\n"
              "  each waits for a receive the other never reaches — a deadlock, and in a ring of\n"
              "  p ranks the same happens all the way round. sendrecv, or irecv + isend then one\n"
              "  wait_all, posts the receive first, so every message has somewhere to land.",
              flush=True)


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    if comm.size < 2:
        refuse(comm, "01_point_to_point.py needs at least 2 ranks: "
                     "mpiexec -n 4 python mpi_examples/01_point_to_point.py")
    blocking(comm)
    nonblocking_ring(comm)
    two_sends(comm)


if __name__ == "__main__":
    main()
