# mpiexec -n 4 python mpi_examples/12_hybrid_mesh.py
"""The dp × pp × tp mesh: a GPT cut into 2 pipeline stages, each stage split over 2 ranks.

``Mesh(comm, dp=1, pp=2, tp=2)`` lays the 4 ranks out as ``arange(4).reshape(pp, dp, cp, tp)`` =
``arange(4).reshape(2, 1, 1, 2)``: tp neighbours adjacent, then dp, then pp (Megatron-LM's
order; Narayanan et al. 2021, §3). Each rank takes its tp group's shard of the
model (``tensor_parallel``, 11), then keeps the pipeline layers of its stage: layers
``partition(parameter_counts(model.pipeline_layers()), pp)`` (09), counted on the whole model so
that every tp rank of a stage gets the same layers. The synchronous ``Pipeline``
runs 1F1B over pp, and within each stage every layer runs tensor-parallel over tp. A pp message
is a tp rank's whole activation (B/m, T, C), since the layers end replicated on every tp rank.
Three SGD steps on both, the same batches: the losses and the whole model, gathered back on
rank 0 under one device's names, equal one device's (PTD-P, Narayanan et al. 2021, §3).
"""


import numpy as np

from scratchpar import nn
from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.mesh import Mesh, MeshError
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel import Hybrid, SingleDevice
from scratchpar.parallel.pipeline import partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.train.task import Task

DP, PP, TP, M, ROWS, STEPS, LR, SEED = 1, 2, 2, 2, 4, 3, 0.1, 5
VOCAB, SEQ, D_MODEL, HEADS, LAYERS = 13, 6, 8, 4, 2
NAMES = ["embedding", *(f"block {i}" for i in range(LAYERS)), "norm and head"]


def gpt():
    """The float64 model every rank builds alike from one seed."""
    return nn.GPT(VOCAB, SEQ, D_MODEL, HEADS, LAYERS, np.random.default_rng(SEED),
                  dtype=np.float64)


def batch(step):
    """Batch ``step``, the same on every rank: (B, T+1) token ids, none of them padding."""
    return np.random.default_rng([SEED, step]).integers(1, VOCAB, (ROWS, SEQ + 1))


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    try:
        mesh = Mesh(comm, dp=DP, pp=PP, tp=TP)
    except MeshError as error:  # raised on every rank alike, before any message
        refuse(comm, f"{error}\nrun it as: mpiexec -n {DP * PP * TP} python "
                     "mpi_examples/12_hybrid_mesh.py")
    say = comm.rank == 0
    if say:
        print(f"{mesh}\n", flush=True)

    model = gpt()
    ranges = partition(parameter_counts(model.pipeline_layers()), PP)  # layers of each stage
    pipe = Hybrid(model, lambda params: SGD(params, LR, 0.9), Task(None, model, "tok"), mesh,
                  schedule=schedules.build("1f1b", PP, M, 1), ranges=ranges)  # copies its shard
    one = gpt()
    single = SingleDevice(one, lambda params: SGD(params, LR, 0.9), Task(None, one, "tok"))

    at = mesh.coords
    held = sum(q.size for q in pipe.params)
    lines = comm.allgather_obj(
        f"rank {comm.rank} at (dp={at.dp}, pp={at.pp}, tp={at.tp}): stage {at.pp} = "
        f"{', '.join(NAMES[i] for i in ranges[at.pp])}, tp shard {at.tp} of it: {held} of "
        f"{one.num_parameters()} parameters; talks to tp {mesh.ranks('tp')}, "
        f"pp {mesh.ranks('pp')}")
    if say:
        print("\n".join(lines))
        print(f"\n1F1B, m = {M} micro-batches of {ROWS // M} rows, SGD with momentum, "
              f"beside one device:", flush=True)
    for step in range(STEPS):
        got, want = pipe.step(batch(step)), single.step(batch(step))
        if say:
            print(f"  step {step}: loss {float(got['loss']):.12f}   one device "
                  f"{float(want['loss']):.12f}", flush=True)

    state = pipe.state_dict()  # collective: tp shards joined, then stages gathered on rank 0
    if say:
        whole, mine = one.state_dict(), state["model"]
        diff = max(float(np.abs(mine[k] - whole[k]).max()) for k in whole)
        same = sorted(mine) == sorted(whole) and diff < 1e-12
        print(f"\ngathered on rank 0: {len(mine)} arrays, max |θ − one device's θ| after "
              f"{STEPS} steps {diff:.1e}; one device's model (to 1e-12): {'yes' if same else 'NO'}")
        b = ROWS // M * SEQ * D_MODEL  # numbers in one micro-batch's activation
        print(f"\nper micro-batch, tp all-reduces {b} numbers 2 times forward and 2 backward "
              f"in every block;\npp sends {b} once each way between stages; dp all-reduces "
              "every gradient once per step.\nSo keep tp inside a node (its fast links), dp "
              "next, and pp, point to point, outermost: the mesh's order.", flush=True)
    pipe.close()
    mesh.free()


if __name__ == "__main__":
    main()
