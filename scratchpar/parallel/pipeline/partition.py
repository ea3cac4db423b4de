"""Cutting a model's pipeline layers into contiguous stages of balanced weight."""

from __future__ import annotations

import math
import os

from ...autograd import Tensor
from ...timing import clock, medians


def partition(weights: list[float], p: int) -> list[range]:
    """Layers 0..n−1 cut into ``p`` contiguous non-empty ranges whose largest total weight is least.

    The linear partition problem, solved exactly by dynamic programming over suffixes:
    ``best[k][i]`` is the least largest stage of layers i..n−1 cut into k stages. Of the optimal
    cuttings the one with the earliest cuts wins, so every rank computes the same answer.
    """
    n = len(weights)
    if not 1 <= p <= n:
        raise ValueError(f"cannot cut {n} layers into {p} stages: need 1 ≤ stages ≤ {n} layers")
    cost = [[math.fsum(weights[i:j]) for j in range(n + 1)] for i in range(n + 1)]  # layers i..j−1
    best = [[math.inf] * n + [0.0]] + [[math.inf] * (n + 1) for _ in range(p)]  # 0 stages: at n
    for k in range(1, p + 1):
        for i in range(n - k + 1):  # k stages need at least k layers
            best[k][i] = min(max(cost[i][j], best[k - 1][j]) for j in range(i + 1, n - k + 2))
    target, ranges, i = best[p][0], [], 0
    for k in range(p, 0, -1):
        j = next(j for j in range(i + 1, n - k + 2)
                 if cost[i][j] <= target and best[k - 1][j] <= target)  # the earliest cut
        ranges.append(range(i, j))
        i = j
    return ranges


def parameter_counts(layers) -> list[int]:
    """Parameters per layer; one that several layers hold (a tied embedding) counts in each."""
    return [sum(param.size for param in layer.parameters()) for layer in layers]


def layer_times(layers, x, repeats: int = 3) -> list[float]:
    """Seconds of forward plus backward of each layer on example input ``x``: the median of
    ``repeats`` runs after one untimed, by the one timing loop (``scratchpar/timing.py``). Each
    layer takes its predecessor's output, cut from the graph so that a backward stays in its
    own layer. The last one's backward starts from the sum of its output. The layers'
    gradients are cleared before each run."""

    def run() -> tuple[float, ...]:
        for layer in layers:
            layer.zero_grad()
        inputs, outputs, seconds, h = [], [], [], x
        for layer in layers:
            start = clock()
            out = layer(h)
            seconds.append(clock() - start)
            inputs.append(h)
            outputs.append(out)
            h = Tensor(out.data, requires_grad=True)
        for i in reversed(range(len(layers))):
            start = clock()
            if i == len(layers) - 1:
                outputs[i].sum().backward()
            elif outputs[i].requires_grad and inputs[i + 1].grad is not None:
                outputs[i].backward(inputs[i + 1].grad)
            seconds[i] += clock() - start
        return tuple(seconds)

    return list(medians(run, repeats))


def layer_names(model) -> list[str]:
    """A name per pipeline layer, from the model's names of the parameters it holds: their
    common module path (``blocks.0``), else their modules joined (``tok+pos``)."""
    name_of = {id(param): name for name, param in model.named_parameters()}
    names = []
    for i, layer in enumerate(model.pipeline_layers()):
        paths = list(dict.fromkeys(name_of[id(param)].rpartition(".")[0]
                                   for param in layer.parameters()))
        common = ".".join(os.path.commonprefix([path.split(".") for path in paths]))
        names.append(common or "+".join(path for path in paths if path) or f"layer {i}")
    return names


def describe(ranges: list[range], names: list[str], weights: list[float], unit: str) -> str:
    """One line per stage: ``stage 0: layers 0–2 (embed, blocks.0, blocks.1) · 12,345 params``."""
    lines = []
    for s, span in enumerate(ranges):
        first, last = span[0], span[-1]
        layers = f"layer {first}" if first == last else f"layers {first}–{last}"
        total = math.fsum(weights[i] for i in span)
        amount = f"{total:,.0f}" if total.is_integer() else f"{total:.3g}"
        lines.append(f"stage {s}: {layers} ({', '.join(names[i] for i in span)}) · {amount} {unit}")
    return "\n".join(lines)

