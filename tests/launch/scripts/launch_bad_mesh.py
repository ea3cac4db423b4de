"""A mesh that does not fit the world: dp=3 on 2 ranks."""

from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator

comm = Communicator(name="world")
abort_on_exception(comm)
Mesh(comm, dp=3)
print(f"rank {comm.rank} built a mesh that cannot exist", flush=True)
