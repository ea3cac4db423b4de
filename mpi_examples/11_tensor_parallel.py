# mpiexec -n 2 python mpi_examples/11_tensor_parallel.py
"""Tensor (Megatron) parallelism: every layer of one GPT split over the ranks (2 or 4 of them).

``tensor_parallel(model, comm)`` cuts this rank's shard from a single-device ``nn.GPT``'s own
weights (Shoeybi et al. 2019, §3). Attention splits by heads: QKV column-parallel, the output
projection row-parallel over the same heads (Fig. 3b). The MLP splits W₁ by columns and W₂ by
rows, so GELU acts on this rank's own slice (Fig. 3a). Megatron's f (forward: identity;
backward: all-reduce) comes before each of them, and g (forward: all-reduce; backward:
identity) after: two all-reduces per block each way. The token embedding splits by vocabulary
rows (a rank looks up the ids it owns, then g). The head splits by vocabulary columns, and
``output_loss`` scores the split logits: it all-reduces each row's max, Σ exp and target logit
(N numbers each), never the B·T·V logits. LayerNorms and positions are replicated. After
backward, a split parameter's gradient on rank r is rank r's slice of one device's gradient
(``layouts(shard)[name].take``); a replicated one's is the whole gradient.
"""

import numpy as np

from scratchpar import nn
from scratchpar.autograd import Tensor
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.chunks import bounds
from scratchpar.comm.mpi import Communicator
from scratchpar.parallel.tensor import tensor_parallel
from scratchpar.parallel.tensor.layout import Split, layouts

VOCAB, SEQ, D_MODEL, HEADS, LAYERS, ROWS, SEED = 13, 6, 8, 4, 2, 3, 5


def span(n, comm):
    """'a–b of n': the slice of n things (heads, units, ids) that this rank holds."""
    start, stop = bounds(n, comm.size)[comm.rank]
    held = {0: "none", 1: f"{start}"}.get(stop - start, f"{start}–{stop - 1}")
    return f"{held} of {n}"


def show(comm, line):
    """Rank 0 prints every rank's line, in rank order."""
    lines = comm.allgather_obj(line)
    if comm.rank == 0:
        print("\n".join(f"  {text}" for text in lines), flush=True)


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    r, t = comm.rank, comm.size
    whole = nn.GPT(VOCAB, SEQ, D_MODEL, HEADS, LAYERS, np.random.default_rng(SEED),
                   dtype=np.float64)  # one device's model, alike on every rank
    shard = tensor_parallel(whole, comm)  # this rank's cut of it, under the same names
    if r == 0:
        print(f"GPT: vocabulary {VOCAB}, d_model {D_MODEL}, {HEADS} heads, {LAYERS} blocks, "
              f"{whole.num_parameters()} parameters; tp = {t}", flush=True)
    qkv, qkv_whole = shard.blocks[0].attn.qkv.weight.shape, whole.blocks[0].attn.qkv.weight.shape
    show(comm, f"rank {r} holds heads {span(HEADS, comm)}, hidden units "
               f"{span(4 * D_MODEL, comm)}, vocabulary rows {span(VOCAB, comm)}: "
               f"{shard.num_parameters()} of {whole.num_parameters()} parameters, the "
               f"replicated ones included (qkv.weight {qkv} of {qkv_whole})")

    batch = np.random.default_rng([SEED, 1]).integers(1, VOCAB, (ROWS, SEQ + 1))  # (B, T+1)
    x, y = nn.shift(batch)  # (B, T), (B, T)
    logits = shard(Tensor(x))  # (B, T, V/t): this rank's columns of the logits
    loss, one = shard.output_loss(logits, y, "mean"), nn.lm_loss(whole, batch)
    loss.backward()
    one.backward()
    show(comm, f"rank {r}: logits {logits.shape}, loss {loss.item():.12f} over its "
               f"{logits.shape[-1]} columns; one device's nn.lm_loss {one.item():.12f}")

    theirs, layout = dict(whole.named_parameters()), layouts(shard)
    worst = {"split": 0.0, "replicated": 0.0}
    for name, p in shard.named_parameters():
        split = isinstance(layout[name], Split)  # then rank r's slice of one device's gradient
        want = layout[name].take(theirs[name].grad, r, t) if split else theirs[name].grad
        kind = "split" if split else "replicated"
        worst[kind] = max(worst[kind], float(np.abs(p.grad - want).max()))
    worst = {k: max(w[k] for w in comm.allgather_obj(worst)) for k in worst}
    losses = comm.allgather_obj(abs(loss.item() - one.item()))
    if r == 0:
        print(f"\nloss equals one device's on every rank (to 1e-12): "
              f"{'yes' if max(losses) < 1e-12 else 'NO'}")
        print(f"max |∂L/∂θ − one device's slice| over every rank's split parameters: "
              f"{worst['split']:.1e}; replicated (LayerNorms, positions, biases after g): "
              f"{worst['replicated']:.1e}")
        print(f"every gradient equals one device's (to 1e-12): "
              f"{'yes' if max(worst.values()) < 1e-12 else 'NO'}")
        print(f"messages per step: forward {2 * LAYERS + 1} all-reduces of B·T·C = "
              f"{ROWS * SEQ * D_MODEL} numbers (embedding, 2 per block) + 2 small ones in the "
              f"loss; backward {2 * LAYERS + 1} (f before QKV, W₁ and the head)", flush=True)


if __name__ == "__main__":
    main()
