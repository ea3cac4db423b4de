"""One sparse layer's two all-to-alls: each kept assignment's token to the rank holding its
expert, and the expert's output back (Lepikhin et al. 2020, GShard §2.2; Fedus et al. 2021,
§2.2). The counts go first, so that each rank knows what it receives, then the tokens."""

from __future__ import annotations

import numpy as np

from ...autograd import Tensor
from ...autograd import functional as F
from ...comm import collectives
from .. import duals


def exchange(experts, tokens, routes, comm):
    """(kept + 1, C): this rank's kept assignments' expert outputs in slot order (expert 0's
    rows first, as ``routes`` numbers them), then a zero row. ``experts`` are this rank's E/ep
    of ``comm``'s E, ``tokens`` (N, C) this rank's."""
    p, xp = comm.size, tokens.xp
    per_expert = np.array([len(rows) for rows in routes.rows], np.int64)  # (E,)
    sends = per_expert.reshape(p, -1)  # (ep, E/ep): to each rank, for each of its experts
    gets = collectives.all_to_all(comm, sends)  # (ep, E/ep): from each rank, for each of ours
    out = F.concat([tokens[rows] for rows in routes.rows], axis=0)  # (kept, C) in slot order
    arrived = duals.all_to_all_v(out, comm, sends.sum(1), gets.sum(1))  # (R, C) by source
    first = (np.cumsum(gets.reshape(-1)) - gets.reshape(-1)).reshape(gets.shape)  # (ep, E/ep)
    order = np.concatenate([np.arange(first[s, j], first[s, j] + gets[s, j], dtype=np.int64)
                            for j in range(gets.shape[1]) for s in range(p)])  # by expert
    mine = F.split(arrived[xp.asarray(order)], gets.sum(0).tolist(), axis=0)
    done = F.concat([expert(rows) for expert, rows in zip(experts, mine)], axis=0)
    back = done[xp.asarray(np.argsort(order))]  # (R, C) by source again
    outputs = duals.all_to_all_v(back, comm, gets.sum(1), sends.sum(1))  # (kept, C)
    zero = Tensor(xp.zeros((1, tokens.shape[1]), tokens.dtype))
    return F.concat([outputs, zero], axis=0)
