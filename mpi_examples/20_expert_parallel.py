# mpiexec -n 4 python mpi_examples/20_expert_parallel.py
"""Expert parallelism by hand: one sparse layer whose E experts are split over the ranks.

A mixture of experts puts E feed-forward layers where a block has one, and a router sends each
token to k of them (Shazeer et al. 2017). Each of p ranks (1, 2, 4 or 8) holds its tokens, a
data-parallel share of the micro-batch, and E/p of the experts: ep = p folds onto the dp ranks
(``Mesh(comm, ep=p)``). One layer is two all-to-alls (Lepikhin et al. 2020, GShard §2.2): each
token to the ranks of its k experts, then each expert's output back, where the token's gates
weigh and sum them. The row counts travel first, so that every rank knows what it receives.

An expert takes at most ⌈k·N·c/E⌉ of the assignments of the micro-batch's N tokens (Fedus et
al. 2021, eq. 3), every token's first choice before any token's second, tokens in order. A rank
sees only its own tokens: a tally of every rank's counts tells it how many assignments lie ahead
of its own, so it drops what one device drops. c = 0 (dropless) drops nothing.

Rank 0 prints its first tokens' routes, then what every rank sent and received. Then
scratchpar's ``expert_parallel`` layer, on each rank's rows, is checked against one device's on
the whole micro-batch: the outputs, the gradient of every expert a rank holds, and the router's.
"""

import sys

import numpy as np

from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.comm import collectives
from scratchpar.comm.abort import abort_on_exception, refuse
from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.nn.moe import Experts, MixtureOfExperts
from scratchpar.nn.routing import Share, assign, count, places, tally, top_k
from scratchpar.parallel import duals
from scratchpar.parallel.experts import ExpertGroup, expert_parallel

EXPERTS, K, ROWS, SEQ, C, SEED = 8, 2, 2, 3, 4, 0  # E, choices a token, rows a rank, T, width


def layer(factor):
    """The same sparse layer on every rank (each C → 4C → C), ``factor`` its capacity's c."""
    return MixtureOfExperts(C, Experts(EXPERTS, K, factor), np.random.default_rng(SEED),
                            dtype=np.float64)


def routing(comm, moe, tokens):
    """This rank's tokens' routes, by hand: softmax, top k, gates, and slots by the tally."""
    logits = tokens @ moe.router.weight.data  # (n, E)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)  # (n, E)
    choice = top_k(probs, K)  # (n, k): best first
    chosen = np.take_along_axis(probs, choice, -1)
    gates = chosen / chosen.sum(-1, keepdims=True)  # renormalized over the k (Mixtral, §2.1)
    n, segments = len(tokens), np.array([0, len(tokens)])  # one run of the micro-batch's tokens
    share = Share(np.array([comm.rank * n]), count(choice, EXPERTS, segments), probs.sum(0),
                  0.0, n)  # where they start in the micro-batch, their assignments (1, k, E)
    told = tally(comm.allgather_obj(share), comm.rank, segments, K, moe.spec)
    place = places(choice, EXPERTS, segments, told.before)  # (n, k): GShard's Algorithm 1 order
    return probs, choice, gates, assign(choice, place, told.slots, EXPERTS), told.slots


def dispatch(comm, held, tokens, routes):
    """(kept, C): this rank's kept assignments' expert outputs, in slot order (expert 0's rows
    first), from the experts' ranks; the rows sent to each (p, E/p) and received (p, E/p)."""
    p = comm.size
    sends = np.array([len(rows) for rows in routes.rows]).reshape(p, -1)  # to rank j, expert e
    gets = collectives.all_to_all(comm, sends)  # counts first: from rank i, for our expert e
    out = F.concat([Tensor(tokens)[rows] for rows in routes.rows], axis=0)  # (kept, C)
    arrived = duals.all_to_all_v(out, comm, sends.sum(1), gets.sum(1))  # tokens out: (R, C) by rank
    first = (np.cumsum(gets) - gets.reshape(-1)).reshape(gets.shape)  # (rank i, expert e) start
    order = np.concatenate([np.arange(first[i, e], first[i, e] + gets[i, e])
                            for e in range(gets.shape[1]) for i in range(p)])  # (R,) by expert
    mine = F.split(arrived[order], gets.sum(0).tolist(), axis=0)
    done = F.concat([expert(rows) for expert, rows in zip(held, mine)], axis=0)  # (R, C)
    back = done[np.argsort(order)]  # (R, C) by source rank again
    return duals.all_to_all_v(back, comm, gets.sum(1), sends.sum(1)).data, sends, gets  # back


def check(mesh, x, proj, mine, factor):
    """Max |Δ| from one device of scratchpar's expert-parallel layer: outputs, held experts'
    gradients, router's gradient (summed over the replicas); its drops; one device's."""
    one = layer(factor)
    want = one(Tensor(x))  # (B, T, C): the whole micro-batch
    (want * Tensor(proj)).sum().backward()  # the aux losses ride in on the output (F.carry)
    moe = layer(factor)
    expert_parallel(moe, ExpertGroup(mesh.replica_comm, mesh.ep_comm))  # keeps E/ep experts
    got = moe(Tensor(x[mine]))  # (ROWS, T, C): this rank's rows
    (got * Tensor(proj[mine])).sum().backward()
    theirs = dict(one.named_parameters())  # experts.2.0.weight: expert 2's, on either side
    experts = max(float(np.abs(p.grad - theirs[name].grad).max())
                  for name, p in moe.named_parameters() if name.startswith("experts."))
    # an expert's gradient sums over mesh.edp_comm, the ranks holding it: here one rank
    router = collectives.all_reduce(mesh.replica_comm, moe.router.weight.grad)  # dp's sum
    errors = (float(np.abs(got.data - want.data[mine]).max()), experts,
              float(np.abs(router - one.router.weight.grad).max()))
    return errors, moe.stats["dropped"], one.stats["dropped"]


def main():
    comm = Communicator()
    abort_on_exception(comm)  # an exception on one rank ends every rank, instead of a hang
    p, r, share = comm.size, comm.rank, EXPERTS // comm.size
    if EXPERTS % p:  # every rank alike, before any message
        refuse(comm, f"{EXPERTS} experts do not split over {p} ranks: run on 1, 2, 4 or 8 of them")
    gen = np.random.default_rng([SEED, 1])  # every rank draws the same micro-batch
    x = gen.standard_normal((ROWS * p, SEQ, C))  # (B, T, C), B = ROWS·p
    proj = gen.standard_normal(x.shape)  # a fixed projection: the loss is Σ y·proj
    mine = slice(r * ROWS, (r + 1) * ROWS)  # this rank's rows of it
    tokens = x[mine].reshape(-1, C)  # (n, C), n = ROWS·T
    one = layer(1.0)  # c = 1: some assignments dropped
    want = one(Tensor(x)).data[mine].reshape(-1, C)  # one device's rows for these tokens
    probs, choice, gates, routes, slots = routing(comm, one, tokens)
    held = [one.experts[i] for i in range(r * share, (r + 1) * share)]  # E/p experts from r·E/p
    kept, sends, gets = dispatch(comm, held, tokens, routes)
    ends = np.concatenate([kept, np.zeros((1, C))])  # a dropped assignment reads the zero row
    y = sum(gates[:, j:j + 1] * ends[routes.slot[:, j]] for j in range(K))  # (n, C)
    error = float(np.abs(y - want).max())
    reports = comm.allgather_obj((sends.sum(1).tolist(), int(gets.sum()), routes.dropped, error))
    mesh = Mesh(comm, ep=p)  # dp = p, ep folded onto it (Liu et al. 2025): ep_comm = dp's
    checks = [check(mesh, x, proj, mine, factor) for factor in (0.0, 1.0)]
    checks = [(*map(max, zip(*comm.allgather_obj(errors))), dropped, alone)
              for errors, dropped, alone in checks]  # each |Δ|: the worst rank's
    mesh.free()
    if r != 0:
        return
    print(f"{EXPERTS} experts over {p} ranks ({share} each), top {K}; {ROWS} rows of {SEQ} "
          f"tokens a rank, width {C}")
    print(f"routing by hand on rank 0 (softmax over the experts, top {K}, gates renormalized):")
    for t in range(3):
        print(f"  token {t}: p = {np.array2string(probs[t], precision=2)} → experts "
              f"{choice[t].tolist()}, gates {np.array2string(gates[t], precision=2)}")
    print(f"capacity ⌈k·N·c/E⌉ = ⌈{K}·{ROWS * SEQ * p}·1.0/{EXPERTS}⌉ = {slots} assignments "
          f"an expert; one device drops {one.stats['dropped']}")
    print("an all-to-all of the counts, then all-to-all-v: tokens out, outputs back")
    print("         dropped   sent to ranks " + " ".join(f"{j:>3}" for j in range(p)) +
          "   received")
    for rank, (sent, got, dropped, _) in enumerate(reports):
        print(f"  rank {rank}  {dropped:>6}                 {' '.join(f'{s:>3}' for s in sent)}"
              f"   {got:>3} rows for experts {rank * share}–{(rank + 1) * share - 1}")
    worst = max(rep[3] for rep in reports)
    print(f"every rank's combined rows equal one device's layer: max |error| {worst:.1e} "
          f"({'yes' if worst < 1e-12 else 'NO'})")
    print(f"expert_parallel over Mesh(dp={p}, ep={p}), max |Δ| from one device:")
    good = [max(c[:3]) < 1e-12 and c[3] == c[4] for c in checks]
    for factor, (out, experts, router, dropped, alone), ok in zip((0.0, 1.0), checks, good):
        print(f"  c = {factor}: outputs {out:.1e}, held experts' gradients {experts:.1e}, "
              f"router's (summed over ranks) {router:.1e}; dropped {dropped} (one device "
              f"{alone}): {'matches one device' if ok else 'DIFFERS'}")
    if worst >= 1e-12 or not all(good):
        sys.exit(1)


if __name__ == "__main__":
    main()
