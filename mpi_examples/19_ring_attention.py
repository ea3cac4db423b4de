# mpiexec -n 4 python mpi_examples/19_ring_attention.py
"""Ring attention by hand: one causal attention layer over a sequence that no rank holds whole.

Each of the p ranks holds 2 of the sequence's 2p chunks, chunk r and chunk 2p − 1 − r (the
zig-zag cut), of the queries, keys and values. The keys and values travel round the ring, one
rank's block a step; each rank attends its queries to the block in hand and folds the result
into what it has by the log-sum-exp of the scores (Liu et al. 2023, "Ring Attention", §3):

    lse ← log(e^lse + e^lse_b),   out ← out·e^(lse_old − lse) + out_b·e^(lse_b − lse)

The blocks it skips are those wholly in its queries' future. Each rank prints what it did, the
work it did (query-key pairs scored) under this cut and under the contiguous one, and checks its
rows against one device's attention and against scratchpar's RingAttention.
"""

import sys

import numpy as np

from scratchpar.autograd import Tensor
from scratchpar.comm.abort import abort_on_exception
from scratchpar.comm.mpi import Communicator
from scratchpar.nn.attention import AttentionCore
from scratchpar.parallel.context import Context, RingAttention, positions

B, H, CHUNK, D = 2, 2, 3, 4  # batch, heads, positions per chunk, head width


def one_device(q, k, v):
    """softmax(QKᵀ/√d, the future hidden)·V over the whole sequence: (B, H, T, d)."""
    return AttentionCore()(Tensor(q), Tensor(k), Tensor(v)).data


def block(q, k, v, mine, theirs):
    """Attention of this rank's queries to one block: its output, normalized by the block's
    own softmax, and the log-sum-exp of its scores (−∞ for a query that sees none of it)."""
    hidden = theirs[None, :] > mine[:, None]  # (Tq, Tk): keys in the query's future
    scores = np.where(hidden, -np.inf, q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1]))
    high = np.max(scores, axis=-1, keepdims=True)  # (B, H, Tq, 1)
    high = np.where(np.isfinite(high), high, 0.0)
    weights = np.exp(scores - high)
    total = weights.sum(-1)  # (B, H, Tq)
    seen = total > 0
    out = weights @ v / np.where(seen, total, 1.0)[..., None]
    return out, np.where(seen, high[..., 0] + np.log(np.where(seen, total, 1.0)), -np.inf)


def ring_attention(comm, q, k, v, held):
    """This rank's rows of causal attention, the keys and values passed round the ring."""
    p, r = comm.size, comm.rank
    out, lse = np.zeros(q.shape), np.full(q.shape[:-1], -np.inf)  # (B, H, Tq, d), (B, H, Tq)
    kv, log, pairs = np.stack([k, v]), [], 0
    for step in range(p):
        source = (r - step) % p  # whose block this rank holds at this step
        if np.all(held[source][None, :] > held[r][:, None]):
            log.append(f"step {step}: block of rank {source} skipped, all in its future")
        else:
            part, part_lse = block(q, kv[0], kv[1], held[r], held[source])
            merged = np.logaddexp(lse, part_lse)
            out = (out * np.exp(lse - merged)[..., None]
                   + part * np.exp(part_lse - merged)[..., None])
            lse = merged
            seen = int((held[source][None, :] <= held[r][:, None]).sum())
            pairs += seen
            log.append(f"step {step}: block of rank {source}, {seen} query-key pairs")
        if step < p - 1:
            incoming = np.empty_like(kv)
            comm.sendrecv(kv, (r + 1) % p, incoming, (r - 1) % p)
            kv = incoming
    return out, log, pairs


def work(held, r):
    """Query-key pairs rank r scores under a causal mask: keys at or before each query."""
    return int(sum((np.concatenate(held) <= position).sum() for position in held[r]))


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    p, r = comm.size, comm.rank
    t = 2 * p * CHUNK
    gen = np.random.default_rng(0)  # every rank draws the same whole sequence
    q, k, v = (gen.standard_normal((B, H, t, D)) for _ in range(3))
    held = [positions(t, p, rank) for rank in range(p)]
    mine = held[r]
    rows = [np.ascontiguousarray(a[:, :, mine]) for a in (q, k, v)]
    out, log, pairs = ring_attention(comm, *rows, held)
    error = float(np.abs(out - one_device(q, k, v)[:, :, mine]).max())
    library = RingAttention(Context(comm))(*(Tensor(a) for a in rows)).data
    same = bool(np.array_equal(library, out)) or float(np.abs(library - out).max()) < 1e-12
    contiguous = [positions(t, p, rank, "contiguous") for rank in range(p)]
    reports = comm.allgather_obj((log, pairs, work(contiguous, r), error, same))
    if r != 0:
        return
    print(f"ring attention on {p} ranks: a sequence of {t} positions in {2 * p} chunks of "
          f"{CHUNK}, B={B}, H={H}, d={D}")
    for rank, (lines, done, naive, _, _) in enumerate(reports):
        print(f"rank {rank} holds positions {held[rank].tolist()}")
        for line in lines:
            print(f"  {line}")
        print(f"  work: {done} pairs zig-zag, {naive} contiguous")
    done, naive = [rep[1] for rep in reports], [rep[2] for rep in reports]
    print(f"busiest rank ÷ mean work: zig-zag {max(done) / np.mean(done):.2f}, "
          f"contiguous {max(naive) / np.mean(naive):.2f}")
    worst = max(rep[3] for rep in reports)
    print(f"equals one device's attention on every rank: max |error| {worst:.1e} "
          f"({'yes' if worst < 1e-12 else 'NO'})")
    print(f"equals scratchpar's RingAttention: {'yes' if all(rep[4] for rep in reports) else 'NO'}",
          flush=True)
    if worst >= 1e-12 or not all(rep[4] for rep in reports):
        sys.exit(1)


if __name__ == "__main__":
    main()
