"""The largest GPT the training command starts in a fixed memory per rank (its own estimate,
by which it refuses a run), at 1, 2 and 4 ranks, under ZeRO-3 and under tp × pp, saving
checkpoints. With every rank building the whole model, rank 0 gathering it to score and the
state to save (the contract before pieces and deferred models), rank 0's whole state caps it
however many ranks share the rest; now it grows with the ranks, about as fast as they do.
``docs/checkpoints.md`` quotes these depths."""

import pytest

from scratchpar.train import load_config
from scratchpar.train.memory import estimate
from scratchpar.train.strategies import REGISTRY
from scratchpar.train.strategies.family import Family

BUDGET = 2**30  # bytes a rank
RUN = ["--model", "gpt", "--d-model", "512", "--n-heads", "8", "--seq-len", "64",
       "--batch-size", "8", "--optimizer", "adam", "--save", "ck"]
LAYOUTS = {
    "zero-3": {n: ["--strategy", "zero", "--zero-stage", "3"] for n in (1, 2, 4)},
    "tp × pp": {1: ["--strategy", "hybrid", "--pp", "1", "--tp", "1", "--microbatches", "2"],
                2: ["--strategy", "hybrid", "--pp", "1", "--tp", "2", "--microbatches", "2"],
                4: ["--strategy", "hybrid", "--pp", "2", "--tp", "2", "--microbatches", "4"]},
}
# the most layers that fit, old contract and now, at 1, 2 and 4 ranks
DEPTHS = {"zero-3": {1: (5, 8), 2: (8, 14), 4: (10, 24)},
          "tp × pp": {1: (8, 14), 2: (11, 27), 4: (13, 53)}}


class WholeOnRankZero:
    """A family as it was: every rank builds the whole model; rank 0 gathers the state to save
    and the model to score."""

    def draws_parts(self, cfg) -> bool:
        return False

    def saved(self, cfg, shape, world_size: int) -> int:
        return Family.saved(self, cfg, shape, world_size)

    def gathered(self, cfg, shape, world_size: int, description) -> int:
        return shape.bytes + description.holds["parameters"]


def largest(flags: list[str], ranks: int) -> int:
    """The most layers whose estimate fits BUDGET (0: none)."""
    fits = 0
    for depth in range(1, 200):
        cfg = load_config([*RUN, "--n-layers", str(depth), *flags], world_size=ranks)
        if sum(estimate(cfg, ranks).values()) > BUDGET:
            break
        fits = depth
    return fits


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_largest_model_grows_with_the_ranks_only_now(layout, monkeypatch):
    found = {}
    for ranks, flags in LAYOUTS[layout].items():
        now = largest(flags, ranks)
        family = REGISTRY[flags[1]]
        with monkeypatch.context() as patch:
            patch.setitem(REGISTRY, flags[1],
                          type("Old", (WholeOnRankZero, type(family)), {})())
            old = largest(flags, ranks)
        found[ranks] = (old, now)
    assert found == DEPTHS[layout]
    old, now = zip(*found.values())
    assert now[-1] >= 2 * old[-1] and now[-1] / now[0] > 2.5 > old[-1] / old[0]
