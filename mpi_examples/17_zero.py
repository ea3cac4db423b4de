# mpiexec -n 4 python mpi_examples/17_zero.py
"""ZeRO stage by stage: what each of 4 ranks holds, and that every stage trains as one device.

Data parallelism keeps a whole copy of the parameters, the gradient and Adam's two moments on
every rank: 16 bytes per float32 parameter. ZeRO (Rajbhandari et al. 2020) gives each rank 1/N
of them instead: stage 1 the optimizer state, stage 2 the gradient too, stage 3 the parameters
too, gathered layer by layer when forward and backward need them. With ``offload`` the
optimizer state and a master copy of the rank's chunk move to host memory (Ren et al. 2021).

For a small GPT in float32, rank 0 prints for each stage the bytes its ledger counted at their
peak, by part, beside the paper's formula, and the loss and gradient after three AdamW steps
against one device's.
"""

import numpy as np

from scratchpar import nn
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import AdamW
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.ledger import Ledger
from scratchpar.parallel.zero import STAGES
from scratchpar.parallel.zero.formula import formula
from scratchpar.train.task import Task

VOCAB, SEQ, WIDTH, HEADS, LAYERS, ROWS, STEPS = 32, 16, 64, 4, 2, 8, 3
BUCKET = 16 << 10  # stage 1 packs one bucket beside the whole gradient: keep them small
PARTS = ("parameters", "gradients", "optimizer", "host")
KIB = 1024


def gpt(dtype=np.float32) -> Task:
    return Task(None, nn.GPT(VOCAB, SEQ, WIDTH, HEADS, LAYERS, np.random.default_rng(0),
                             dtype=dtype), "tok")


def adamw(params):
    """The optimizer every run here makes over what it steps (a ZeRO rank: its chunks)."""
    return AdamW(params, lr=1e-2)


def batch(step):
    return np.random.default_rng([5, step]).integers(1, VOCAB, (ROWS, SEQ + 1))  # (B, T + 1)


def train(mesh, stage, offload):
    """Three steps of ``stage``; the last metrics, the strategy, its ledger."""
    task = gpt()
    run = STAGES[stage](task.model, adamw, task, mesh, bucket_bytes=BUCKET, grad_clip=1.0,
                        offload=offload)
    ledger = run.attach(Ledger())  # counts what the stage holds, at every moment it may change
    for step in range(STEPS):
        metrics = run.step(batch(step))
    return metrics, run, ledger


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    say = comm.rank == 0
    mesh = Mesh(comm)  # pure data parallelism: every rank a chunk of every group
    one = gpt()
    single = SingleDevice(one.model, adamw, one, grad_clip=1.0)
    for step in range(STEPS):
        want = single.step(batch(step))
    psi = one.model.num_parameters()
    if say:
        print(f"a GPT of Ψ = {psi:,} float32 parameters, AdamW, {comm.size} ranks; KiB per rank "
              "measured (formula)")
        print(f"  {'':<16}" + "".join(f"{part:>20}" for part in PARTS) + "   loss after 3 steps")
    for stage, offload in [(1, False), (2, False), (3, False), (3, True)]:
        got, run, ledger = train(mesh, stage, offload)
        if stage == 1:
            largest = max(g.n for g in run.groups) * 4 / KIB  # bytes of its largest bucket
        grads = run.gradients()  # gathered from every rank's chunk
        worst = max(float(np.abs(g - p.grad).max()) for g, p in zip(grads, one.model.parameters()))
        run.close()
        if say:
            want_bytes = formula(stage, psi, comm.size, 4, 8, offload)  # s = 4, K = 8: Adam
            cells = "".join(f"{ledger.peak.get(part, 0) / KIB:11.1f} "
                            f"({want_bytes.get(part, 0) / KIB:6.1f})" for part in PARTS)
            name = f"ZeRO-{stage}" + (" + offload" if offload else "")
            print(f"  {name:<16}{cells}   {got['loss']:.6f} (one device {want['loss']:.6f}), "
                  f"|Δ gradient| ≤ {worst:.1e}")
    mesh.free()
    if say:
        print(f"  data parallel holds all of it on every rank: {16 * psi / KIB:.1f} KiB; stage "
              f"1 packs each bucket beside the gradient (the largest: {largest:.1f} KiB)")


if __name__ == "__main__":
    main()
