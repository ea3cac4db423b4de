"""This rank's share of a pipelined model: its chunks of layers and their parameters, named as
in the whole model, the parameters that other ranks hold too (a tied embedding), and how a
caller frees the rest."""

from __future__ import annotations

from ...backend import get_array_module
from ...nn.module import Sequential
from ...nn.unfilled import is_unfilled


class StageModel:
    """Chunk ``c`` of rank ``rank`` runs layers ``ranges[c·p + rank]`` of the model's
    ``pipeline_layers()``.

    ``ranges`` (from :func:`~.partition.partition`) covers the layers with ``p·v`` contiguous
    ranges, one per virtual stage. Every rank builds the whole model alike (same seed), so the
    parts agree without a message. The chunks are the model's own layers, not copies: the
    stage trains them in place, and its owner may then free the others (:func:`release`).

    ``params`` are this rank's distinct parameters in the whole model's order, ``index[i]`` the
    place of ``params[i]`` in ``model.parameters()`` (checkpoints and optimizer states are keyed
    by it), or in the whole model's names ``order`` where ``model`` holds only part of it (a
    sparse layer's experts on this rank), ``names[i]`` its name. ``holders[i]`` lists the ranks
    holding ``params[i]``: more than one for a parameter that layers on several ranks use
    (∩θᵢ ≠ ∅), such as a tied embedding whose two ends sit on the first and last stage (tied as
    in Shoeybi et al. 2019, §3).
    """

    def __init__(self, model, ranges: list[range], rank: int, p: int,
                 order: dict[str, int] | None = None):
        layers = model.pipeline_layers()
        self.p, self.v, self.rank = p, len(ranges) // p, rank
        self.chunks = [Sequential(*[layers[i] for i in ranges[c * p + rank]])
                       for c in range(self.v)]
        named = list(model.named_parameters())
        place = {id(param): i for i, (_, param) in enumerate(named)}
        held_by: dict[int, set[int]] = {}
        for k, span in enumerate(ranges):
            for i in span:
                for param in layers[i].parameters():
                    held_by.setdefault(place[id(param)], set()).add(k % p)
        places = sorted(i for i, ranks in held_by.items() if rank in ranks)
        self.params = [named[i][1] for i in places]
        self.names = [named[i][0] for i in places]
        self.index = places if order is None else [order[name] for name in self.names]
        self.holders = [sorted(held_by[i]) for i in places]
        self.groups = sorted({tuple(sorted(r)) for r in held_by.values() if len(r) > 1})

    def shared(self, group: tuple[int, ...]) -> list[int]:
        """Indices into ``params`` of this rank's parameters held by exactly the ranks ``group``
        (one of ``groups``, the sets of ranks sharing parameters: the same list on every rank)."""
        return [i for i, ranks in enumerate(self.holders) if tuple(ranks) == group]

    def parameters(self) -> list:
        return self.params

    def named_parameters(self) -> list:
        """``(name, parameter)`` of this rank's parameters, named as in the whole model."""
        return list(zip(self.names, self.params))

    def owned(self) -> list:
        """The parameters this rank counts in the global gradient norm: a shared one is counted
        by the lowest rank that holds it, so it counts once."""
        return [param for param, ranks in zip(self.params, self.holders) if ranks[0] == self.rank]

    def state_dict(self) -> dict:
        """This rank's parameters under the whole model's names (live arrays)."""
        return {name: param.data for name, param in zip(self.names, self.params)}


def release(model, keep) -> None:
    """Free the arrays of ``model``'s parameters that are not in ``keep`` (a strategy's
    :attr:`params`): a rank that built the whole model only so that every rank starts from the
    same weights keeps what it trains (Huang et al. 2019, GPipe: model distribution). Each
    keeps its dtype and becomes 0 elements long, until ``gather_model`` fills rank 0's in
    (an unfilled one, of a model built under ``nn.deferred()``, holds nothing already)."""
    mine = {id(param) for param in keep}
    for param in model.parameters():
        if id(param) not in mine and not is_unfilled(param.data):
            param.data = get_array_module(param.data).empty(0, param.dtype)
