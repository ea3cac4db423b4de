"""What each context-parallel scheme sends per layer, as the messages a strategy describes.

With ``a`` the bytes of one micro-batch's activation on a rank (its T/cp positions, its tp
heads' width) and S the whole sequence, a rank's attention per layer sends forward:

- ring: its K and V block on, cp − 1 times: 2(cp − 1)·a ≈ 2·S·b·h·β (Liu et al. 2023, §3);
  backward, the blocks again and their dK, dV (cp hand-ons, in fp32 or wider);
- all-gather: K and V gathered, 2·(cp − 1)/cp of the whole S (the same bytes), exposed;
  backward, their gradients reduce-scattered (Dubey et al. 2024, §3.3.2);
- Ulysses: four all-to-alls (q, k, v and the output) of ``a`` each, (cp − 1)/cp of each on the
  wire: 4·S·b·h·β/cp, falling with cp (Jacobs et al. 2023, §3.1); backward, four more.
"""

from __future__ import annotations

from ..description import Message


def traffic(attention: str, cp: int, a: int, layers: int, itemsize: int = 4
            ) -> tuple[Message, ...]:
    """The cp axis's messages of ``layers`` layer passes (the stage's layers times its
    micro-batches), for the scheme ``attention`` and an activation of ``a`` bytes of
    ``itemsize``-byte elements (the ring's dK and dV travel in fp32 or wider)."""
    if attention == "ring":
        grads = 2 * a * max(itemsize, 4) // itemsize
        return (Message("send", "cp", 2 * a, (cp - 1) * layers, "forward"),
                Message("send", "cp", 2 * a, (cp - 1) * layers, "backward"),
                Message("send", "cp", grads, cp * layers, "backward"))
    if attention == "allgather":
        return (Message("all-gather", "cp", cp * a, 2 * layers, "forward"),
                Message("reduce-scatter", "cp", cp * a, 2 * layers, "backward"))
    return (Message("all-to-all", "cp", a, 4 * layers, "forward"),
            Message("all-to-all", "cp", a, 4 * layers, "backward"))
