"""The ops a GPT's step runs in this engine, counted from its own graph (DESIGN.md, "the
planner's kernel model"): the ``engine`` kernels of ``kernels.py``.

A tiny GPT of the same build (dropout or not, a key/value head per query head or grouped-query
attention) runs a forward and a backward through a
:class:`~scratchpar.autograd.tensor.Hooks` that sees every node of the graph once. Each node
is one op forward and one backward, whatever the sizes; the tiny model's widths are distinct
(T 8, C 12, H 3, d 4, F 20, V 5; G 3, or 1 where grouped), so each node's output shape tells
which activation it is, and its units are elements over that activation's per position:

- the (B, H, T, T) attention scores, which this engine materializes;
- a tp rank's share, split by tp: an output with a heads axis, the query heads' (H·d a
  position) or the key/value heads' (G·d), or the feed-forward's F wide;
- the residual stream (B, T, C), which tp does not split.

A block's count is the two-block model's less the one-block model's; the ends (embedding,
final norm, head, loss) are the rest. Views (reshape, permute, an index) move no bytes, and a
product's reads and writes are in its own time (``kernels.product_s``); every other op is a
memory-bound pass that reads its input and writes its output, forward. The loss reads the
logits, which ``kernels.py`` prices for every kind alike.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from ..autograd.tensor import Hooks
from ..backend import to_device
from ..device_rng import DeviceRandom
from ..nn import GPT, set_dropout_generator
from ..nn.loss import lm_loss

T, C, H, F, V, ROWS = 8, 12, 3, 20, 5, 2  # the tiny GPT's sizes, each distinct
D = C // H
UNMOVED = {"Reshape", "Permute", "GetItem", "MatMul", "Linear"}  # views, and the products
WHAT = ("scores", "heads", "groups", "wide", "stream")


@dataclass
class Passes:
    """Ops and the memory-bound passes' outputs, each in units of its activation: scores of
    (B, H, T, T); heads, groups, wide and stream of (B·T, H·d), (B·T, G·d), (B·T, F) and
    (B·T, C)."""

    nodes: int = 0
    units: dict = field(default_factory=lambda: dict.fromkeys(WHAT, 0.0))

    def __sub__(self, other: Passes) -> Passes:
        return Passes(self.nodes - other.nodes,
                      {k: self.units[k] - other.units[k] for k in WHAT})


class Counting(Hooks):
    """A backward that tallies each node it passes through into :class:`Passes`."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.passes, self.groups = Passes(), groups

    def propagate(self, node, g) -> tuple:
        self.passes.nodes += 1
        if node.fn.__name__ not in UNMOVED:
            what, unit = kind_of(g.shape, self.groups)
            self.passes.units[what] += g.size / unit
        return super().propagate(node, g)


def kind_of(shape: tuple, groups: int) -> tuple[str, int]:
    """Which activation an output of ``shape`` is, among the tiny GPT's of ``groups``
    key/value heads, and the elements of one unit of it."""
    n = ROWS * T
    if shape[-2:] == (T, T):
        return "scores", n * H * T
    if len(shape) >= 4:  # a heads axis: (B, H, T, d), or (B, G, T, d) and its views
        return ("heads", n * C) if math.prod(shape) == n * C else ("groups", n * groups * D)
    if shape and shape[-1] == F:
        return "wide", n * F
    return "stream", n * C


def counted(layers: int, dropout: bool, grouped: bool = False) -> Passes:
    """The passes of one forward and backward of the tiny GPT with ``layers`` blocks."""
    groups = 1 if grouped else H
    model = GPT(V, T, C, H, layers, np.random.default_rng(0), dropout=0.1 if dropout else 0.0,
                kv_heads=groups, d_ff=F)
    set_dropout_generator(model, DeviceRandom(0, 1, 0))
    batch = to_device(np.random.default_rng(1).integers(1, V, (ROWS, T + 1)))  # (B, T + 1)
    # ids, where the model was built: on the selected device (a GPU's planner counts there)
    hooks = Counting(groups)
    lm_loss(model, batch, reduction="sum").backward(hooks=hooks)
    return hooks.passes


@functools.cache
def census(dropout: bool, grouped: bool = False) -> tuple[Passes, Passes]:
    """(a block's passes, the ends') of this engine's GPT, with dropout or without, with
    grouped-query attention (fewer key/value heads than query heads: its graph adds the views
    that group the query heads) or without."""
    one, two = counted(1, dropout, grouped), counted(2, dropout, grouped)
    block = two - one
    return block, one - block
