# mpiexec -n 8 python mpi_examples/04_mesh.py
"""The process mesh: 8 ranks as a dp=2 × pp=2 × tp=2 grid, one communicator per axis.

Ranks are laid out as ``arange(8).reshape(pp, dp, cp, tp)`` with cp = 1: rank = (p·dp + d)·tp + t,
tp fastest, then dp, then pp (Megatron-LM's order). The tp group of a rank holds the ranks that
differ from it only in t, and so on for dp and pp. Each rank all-reduces its own number along
each axis, then along all three in turn, which sums over the whole world: how hybrid parallelism
reduces a gradient that every axis holds a part of.
"""

import sys

import numpy as np

from scratchpar.comm import collectives
from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.mesh import AXES, Mesh, MeshError
from scratchpar.comm.mpi import Communicator

DP, PP, TP = 2, 2, 2


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    try:
        mesh = Mesh(comm, dp=DP, pp=PP, tp=TP)
    except MeshError as error:  # raised on every rank alike, before any message
        refuse(comm, f"{error}\nrun it as: mpiexec -n {DP * PP * TP} python "
                     "mpi_examples/04_mesh.py")
    if comm.rank == 0:
        print(mesh, flush=True)

    mine = np.array([comm.rank], np.int64)
    parts = []
    axes = ("dp", "pp", "tp")  # cp, the fourth axis, is 1 here: each rank its own cp group
    for axis in axes:  # one all-reduce inside each group of this axis
        group = mesh.ranks(axis)
        total = collectives.all_reduce(mesh.comm(axis), mine)
        ok = total[0] == sum(group) and mesh.comm(axis).rank == getattr(mesh.coords, axis)
        parts.append((f"{axis} {group} → {total[0]:<2}", ok))
    world = mine
    for axis in reversed(AXES):  # along every axis in turn, tp first: a sum over all 8 ranks
        world = collectives.all_reduce(mesh.comm(axis), world)
    parts.append((f"{', '.join(reversed(AXES))} in turn → {world[0]}",
                  world[0] == sum(range(comm.size))))

    at = ", ".join(f"{axis}={getattr(mesh.coords, axis)}" for axis in axes)
    line = f"rank {comm.rank} at ({at})   " + "   ".join(text for text, _ in parts)
    rows = comm.allgather_obj((line, all(good for _, good in parts)))
    bad = [r for r, (_, good) in enumerate(rows) if not good]
    if comm.rank == 0:
        print("\neach rank: its group on each axis → the sum of the group's ranks")
        print("\n".join(f"  {line}" for line, _ in rows))
        print("every group sum, and the world sum, checked: "
              f"{'right on every rank' if not bad else f'WRONG on ranks {bad}'}", flush=True)
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
