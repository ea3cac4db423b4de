# mpiexec -n 3 python mpi_examples/10_parallel_branches.py
"""Model parallelism over branches: 4 independent towers over one input, spread over 3 ranks.

``nn.Towers`` runs k towers (Linear–ReLU stacks) side by side on the same x (B, F), joins their
outputs into (B, k·H) and classifies that with one linear head. The towers share no weights and
no activations, so they can run on different devices that talk only where the towers join
(Krizhevsky et al. 2012, §3.2). ``ParallelBranches`` gives rank r the towers
``chunks.bounds(k, p)[r]`` (4 over 3 ranks: 2, 1, 1) under the model's own names, and the head.

Forward: Megatron's f (identity) on x, this rank's towers, one all-gather that puts every
tower's output on every rank, then the head and the loss, alike on every rank. Backward retraces
it: the gather keeps this rank's towers' slice of ∂L/∂joined (every rank computed the same whole
gradient, so nothing is summed), and f's all-reduce adds up the towers' contributions to ∂L/∂x,
so every rank gets the whole input gradient, as one device has it. The head is replicated: its
gradient is the same on every rank, and so are its SGD steps.
"""


import numpy as np

from scratchpar import nn
from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.mpi import Communicator
from scratchpar.optim import SGD
from scratchpar.parallel.branches import ParallelBranches

P, K, FEATURES, SIZES, CLASSES, ROWS, LR, SEED = 3, 4, 6, [8, 5], 3, 10, 0.2, 3


def towers():
    """The float64 model every rank builds alike from one seed."""
    return nn.Towers(FEATURES, SIZES, K, CLASSES, np.random.default_rng(SEED), dtype=np.float64)


def show(comm, line):
    """Rank 0 prints every rank's line, in rank order."""
    lines = comm.allgather_obj(line)
    if comm.rank == 0:
        print("\n".join(f"  {text}" for text in lines), flush=True)


def batch(step):
    """Batch ``step``, the same on every rank: x (ROWS, F), and the class of x's largest of the
    first three features."""
    x = np.random.default_rng([7, step]).standard_normal((ROWS, FEATURES))  # (B, F)
    return x, x[:, :CLASSES].argmax(axis=1)  # (B,)


def worst(got, want) -> float:
    return max(float(np.abs(g - w).max()) for g, w in zip(got, want))


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    say = comm.rank == 0
    if comm.size != P:
        refuse(comm, f"10_parallel_branches.py splits {K} towers over {P} ranks: "
                     f"mpiexec -n {P} python mpi_examples/10_parallel_branches.py")
    share, one = ParallelBranches(towers(), comm), towers()  # the share's whole model is freed
    if say:
        print(f"Towers: {K} towers {FEATURES}→{'→'.join(map(str, SIZES))}, joined "
              f"{K * SIZES[-1]} → head {CLASSES}, over {P} ranks", flush=True)
    held = sorted({name.split(".")[1] for name, _ in share.named_parameters()
                   if name.startswith("towers.")}, key=int)
    first = next(name for name, _ in share.named_parameters())
    show(comm, f"rank {comm.rank} holds towers {', '.join(held)} and the head: "
               f"{share.num_parameters()} of {one.num_parameters()} parameters, named as one "
               f"device names them ({first}, …)")

    x_host, y = batch(0)
    x, x_one = Tensor(x_host, requires_grad=True), Tensor(x_host, requires_grad=True)
    loss, loss_one = F.cross_entropy(share(x), y), F.cross_entropy(one(x_one), y)
    loss.backward()
    loss_one.backward()
    theirs = dict(one.named_parameters())
    diff = worst([p.grad for _, p in share.named_parameters()],
                 [theirs[n].grad for n, _ in share.named_parameters()])
    show(comm, f"rank {comm.rank}: loss {loss.item():.6f} (one device {loss_one.item():.6f}); "
               f"max |∂L/∂θ − one device's| {diff:.1e}; "
               f"max |∂L/∂x − one device's| {worst([x.grad], [x_one.grad]):.1e}")
    if say:
        print(f"  messages: forward one all-gather of the towers' outputs ({ROWS}×{K}×"
              f"{SIZES[-1]} numbers), backward one all-reduce of ∂L/∂x ({ROWS}×{FEATURES})",
              flush=True)

    sgd, sgd_one = SGD(share.parameters(), LR), SGD(one.parameters(), LR)
    if say:
        print("\nSGD on both, the same batches:", flush=True)
    for step in range(1, 6):
        x_host, y = batch(step)
        losses = []
        for model, opt in ((share, sgd), (one, sgd_one)):
            opt.zero_grad()
            loss = F.cross_entropy(model(Tensor(x_host)), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if say:
            print(f"  step {step}: loss {losses[0]:.6f} (one device {losses[1]:.6f})", flush=True)

    whole = share.whole_state_dict()  # collective: every rank sends its towers to rank 0
    if say:
        same = list(whole) == list(one.state_dict()) and worst(
            list(whole.values()), list(one.state_dict().values())) < 1e-12
        print(f"\ngathered back on rank 0: {len(whole)} arrays under the one-device names, "
              f"equal to one device's after 5 steps (to 1e-12): {'yes' if same else 'NO'}",
              flush=True)


if __name__ == "__main__":
    main()
