"""What each context-parallel scheme sends per layer, as the messages a strategy describes.

With ``a`` the bytes of one micro-batch's activation on a rank (its T/cp positions, its tp
heads' width), ``k`` those of its keys (or of its values): a/r where r query heads share each
key/value head (grouped-query attention, Ainslie et al. 2023; a where r = 1), and S the whole
sequence, a rank's attention per layer sends forward:

- ring: its K and V block on, cp − 1 times: 2(cp − 1)·k ≈ 2·S·b·h·β/r (Liu et al. 2023, §3);
  backward, the blocks again and their dK, dV (cp hand-ons, in fp32 or wider);
- all-gather: K and V gathered, 2·(cp − 1)/cp of the whole S (the same bytes), exposed;
  backward, their gradients reduce-scattered (Dubey et al. 2024, §3.3.2);
- Ulysses: four all-to-alls, q and the output of ``a`` each, k and v of ``k`` each,
  (cp − 1)/cp of each on the wire: 2·(1 + 1/r)·S·b·h·β/cp, falling with cp (Jacobs et al.
  2023, §3.1); backward, four more.
"""

from __future__ import annotations

from collections import Counter

from ..description import Message


def traffic(attention: str, cp: int, a: int, layers: int, itemsize: int = 4,
            per_group: int = 1) -> tuple[Message, ...]:
    """The cp axis's messages of ``layers`` layer passes (the stage's layers times its
    micro-batches), for the scheme ``attention`` and an activation of ``a`` bytes of
    ``itemsize``-byte elements (the ring's dK and dV travel in fp32 or wider), each key/value
    head shared by ``per_group`` query heads."""
    k = -(-a // per_group)  # (B, G/tp, T/cp, d): the rank's keys, or its values
    if attention == "ring":
        grads = 2 * k * max(itemsize, 4) // itemsize
        return (Message("send", "cp", 2 * k, (cp - 1) * layers, "forward"),
                Message("send", "cp", 2 * k, (cp - 1) * layers, "backward"),
                Message("send", "cp", grads, cp * layers, "backward"))
    if attention == "allgather":
        return (Message("all-gather", "cp", cp * k, 2 * layers, "forward"),
                Message("reduce-scatter", "cp", cp * k, 2 * layers, "backward"))
    sizes = Counter({a: 2 * layers})  # q and the output; then k and v, one message a size
    sizes[k] += 2 * layers
    return tuple(Message("all-to-all", "cp", nbytes, count, phase)
                 for phase in ("forward", "backward") for nbytes, count in sizes.items())
