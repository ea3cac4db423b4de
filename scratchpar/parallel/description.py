"""What a strategy holds on each rank and sends each step, from the model's shape alone: the one
description that the memory estimate, the benchmarks and the planner read."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..comm import buckets
from ..nn.rnn import RNNLanguageModel

TOTALS = 16  # bytes of the float64 pair [Σ loss, Σ units] that a synchronous step reduces
LISTED = 100_000  # arrays a shape lists the sizes of at most: a model no machine could build
# (a billion layers) is described by its bounds, in no time


@dataclass(frozen=True)
class Shape:
    """A model and its optimizer, as far as a strategy's costs go. Plain integers, so that a
    shape no machine could build still describes in no time.

    Ψ = ``psi`` parameters in ``count`` arrays, the largest of ``largest`` elements, each
    element ``itemsize`` bytes (s), and ``moments`` optimizer arrays per element (Adam 2,
    momentum 1, plain SGD 0), of ``state_itemsize`` bytes an element where not s, beside a
    ``master`` copy of that many bytes an element (mixed precision's fp32 weights: 4; none
    else). The model lists ``depth`` layers for pipelining. ``layer`` is
    the largest one's own parameters, ``stack`` what ZeRO-3 holds gathered at once (the three
    largest layers of a stack, every layer of a recurrent model, whose backward runs through
    them all together), and ``shared`` the parameters several layers hold, or none (a tied
    embedding: ZeRO-3's root group). ``boundary``: bytes of one row's activation between two
    layers (a sample's or a sequence's), 0 where unknown. ``sizes``: each parameter array's
    elements in the order the model defines them, where known (a whole model's; not a
    pipeline stage's)."""

    psi: int
    itemsize: int
    moments: int
    largest: int
    count: int
    depth: int = 1
    layer: int = 0
    stack: int = 0
    shared: int = 0
    boundary: int = 0
    state_itemsize: int = 0
    master: int = 0
    sizes: tuple[int, ...] = ()

    @property
    def bytes(self) -> int:
        """sΨ: one copy of the parameters (or of their gradient)."""
        return self.itemsize * self.psi

    def widened(self) -> Shape:
        """This shape as its masters: fp32 elements in mixed precision (``master`` bytes), the
        weights a strategy moves outside the optimizer (elastic averaging) and sends."""
        return replace(self, itemsize=self.master or self.itemsize)

    @property
    def k(self) -> int:
        """K, the optimizer's bytes per parameter (Rajbhandari et al. 2020, §3): its moments,
        and a master copy in mixed precision. Adam: 8 in fp32; 12 in mixed precision (fp32
        master, momentum and variance beside fp16 weights: the paper's 2 + 2 + 12)."""
        return self.moments * (self.state_itemsize or self.itemsize) + self.master

    @property
    def stepped(self) -> int:
        """Arrays an update of every parameter array touches: each, its moments, its master."""
        return self.count * self.per_array

    @property
    def per_array(self) -> int:
        """Arrays an update touches per parameter array: itself, its moments, its master."""
        return 1 + self.moments + (self.master > 0)

    @classmethod
    def of(cls, model, itemsize: int, moments: int, boundary: int = 0) -> Shape:
        """The shape of a built model; its ``pipeline_layers()``, where it lists them, own the
        parameters only they hold."""
        params = model.parameters()
        layers = getattr(model, "pipeline_layers", lambda: [])()
        holders: dict[int, int] = {}
        for layer in layers:
            for p in layer.parameters():
                holders[id(p)] = holders.get(id(p), 0) + 1
        own = sorted(sum(int(p.size) for p in layer.parameters() if holders[id(p)] == 1)
                     for layer in layers)
        shared = sum(int(p.size) for p in params if holders.get(id(p), 0) != 1)
        recurrent = isinstance(model, RNNLanguageModel)  # backward through all layers at once
        return cls(sum(int(p.size) for p in params), itemsize, moments,
                   max(int(p.size) for p in params), len(params), max(len(layers), 1),
                   own[-1] if own else 0, sum(own) if recurrent else sum(own[-3:]), shared,
                   boundary, sizes=tuple(int(p.size) for p in params))


@dataclass(frozen=True)
class Message:
    """One kind of message a rank takes part in each step: ``count`` times (on average: an
    exchange every τ steps counts 1/τ) the collective or point-to-point ``op`` of ``nbytes``
    (the whole vector a collective reduces or gathers, or the payload one send carries) among
    the ranks of ``axis``, behind the compute ``behind`` names ("forward", "backward") or
    exposed ("")."""

    op: str
    axis: str
    nbytes: int
    count: float
    behind: str = ""

    def wire(self, p: int) -> float:
        """Bytes one of ``p`` ranks sends for one of these messages with the ring algorithms
        (Patarasuk & Yuan 2009): a reduce-scatter or an all-gather passes p − 1 of the p
        chunks on, and an all-reduce is both, 2(p − 1)/p·n; an all-to-all sends all of its n but
        the block it keeps, (p − 1)/p·n. A point-to-point message sends its payload."""
        share = {"all-reduce": 2 * (p - 1) / p, "reduce-scatter": (p - 1) / p,
                 "all-gather": (p - 1) / p, "all-to-all": (p - 1) / p}
        return share.get(self.op, 1.0) * self.nbytes


@dataclass(frozen=True)
class Description:
    """What the rank that holds the most holds, in bytes by what it is for: ``parameters``
    (with copies being averaged or gathered), ``gradients``, ``optimizer`` state and
    ``buffers`` (the buckets and scratch of the gradient's reduction). ``on_host`` is how many
    of those bytes lie in host memory beside a device, and ``chunk`` the elements the optimizer
    updates at once (its work arrays' size), and ``arrays`` how many arrays its update steps
    (each parameter array or flat shard, and its moments): an elementwise op per array costs
    the engine its call beside its bytes. ``sends`` are the messages it takes part in each
    step."""

    holds: dict[str, int]
    sends: tuple[Message, ...] = ()
    on_host: int = 0
    chunk: int = 0
    arrays: int = 0

    def held(self) -> int:
        return sum(self.holds.values())


def replicated(shape: Shape, parameters: int = 0, buffers: int = 0) -> dict[str, int]:
    """A rank holding the whole model and its optimizer: sΨ of parameters, sΨ of gradient and
    KΨ of state (Rajbhandari et al. 2020, §3: 4 + 4 + 8 = 16 bytes per parameter for Adam in
    float32, 2 + 2 + 12 in mixed precision), with ``parameters`` and ``buffers`` more beside
    them."""
    return {"parameters": shape.bytes + parameters, "gradients": shape.bytes,
            "optimizer": shape.k * shape.psi, "buffers": buffers}


def bucketed(shape: Shape, bucket_bytes: int, op: str, axis: str, behind: str = "",
             every: float = 1.0, backward: bool = True) -> Message:
    """The gradient (or the model) reduced in buckets of b = ``bucket_bytes`` (Li et al. 2020,
    PyTorch DDP §3.2), every ``every`` steps, packed as the engine packs them
    (``comm/buckets.py``): the arrays in order, reversed where the buckets follow
    ``backward`` (the order its gradients finish in), a bucket opened only when the next array
    would overflow the open one. Where the shape lists its arrays' sizes, that packing counts
    them. Where it does not (a pipeline stage), every bucket but the last holds more than b
    less an array (sL at most, L the largest), so ⌈sΨ/(b − sL)⌉ buckets at most; two
    neighbours always hold more than b, at most 2⌈sΨ/b⌉; and at most one bucket an array. The
    least of these bounds stands for the count."""
    b, largest = max(bucket_bytes, 1), shape.itemsize * shape.largest
    if shape.sizes:
        count = buckets.count(shape.sizes[::-1] if backward else shape.sizes, shape.itemsize, b)
    else:
        bounds = [shape.count, 2 * -(-shape.bytes // b)]
        if largest < b:
            bounds.append(-(-shape.bytes // (b - largest)))
        count = max(1, min(bounds))
    return Message(op, axis, -(-shape.bytes // count), count / every, behind)


def stage_share(shape: Shape, stages: int) -> int:
    """Elements of the largest of ``stages`` contiguous stages a balanced partition makes:
    at most Ψ/p plus one layer (the linear partition's bound), plus what ends hold twice."""
    return min(shape.psi, math.ceil(shape.psi / stages) + (shape.layer or shape.largest)
               + shape.shared)
