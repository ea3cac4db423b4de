"""What expert parallelism sends per sparse layer, as the messages a strategy describes.

With ``a`` the bytes of one micro-batch's activation on a rank (its tokens, C wide), each of
its k·tokens assignments goes to its expert's rank and comes back: two all-to-alls forward
(dispatch, combine) of k·a bytes each, (ep − 1)/ep of them on the wire when the experts are
balanced, so 2·(ep − 1)/ep·k·tokens·C·β a layer (Lepikhin et al. 2020, GShard §2.2), and two
backward, the gradients retracing them. Each forward also exchanges the micro-batch's routing
tally over the dp × cp ranks: E·(k + 1) numbers a segment of a rank's rows, left out here.
"""

from __future__ import annotations

from ..description import Message


def traffic(k: int, a: int, layers: int) -> tuple[Message, ...]:
    """The ep axis's messages of ``layers`` sparse-layer passes (the stage's sparse layers
    times its micro-batches) of ``a``-byte activations, each token routed to ``k`` experts."""
    return (Message("all-to-all", "ep", k * a, 2 * layers, "forward"),
            Message("all-to-all", "ep", k * a, 2 * layers, "backward"))
