"""Every exported strategy is built one way: (model, make_optimizer, objective, mesh, /, *, …),
its four parts positional, every knob keyword-only; what else the package exports builds a
model, not a training step."""

import inspect

import pytest

from scratchpar import parallel
from scratchpar.parallel.strategy import Strategy

EXPORTED = [getattr(parallel, name) for name in parallel.__all__]
STRATEGIES = [c for c in EXPORTED if isinstance(c, type) and issubclass(c, Strategy)]
PARTS = ["model", "make_optimizer", "objective", "mesh"]


def test_what_is_not_a_strategy_builds_a_model():
    others = sorted(getattr(c, "__name__", repr(c)) for c in EXPORTED if c not in STRATEGIES)
    assert others == ["ParallelBranches", "tensor_parallel"]  # a module, and a model's shard
    assert len(STRATEGIES) >= 19


@pytest.mark.parametrize("cls", STRATEGIES, ids=lambda c: c.__name__)
def test_every_strategy_takes_the_one_shape(cls):
    parameters = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in parameters[:4]] == PARTS
    assert all(p.kind is p.POSITIONAL_ONLY for p in parameters[:4])
    knobs = parameters[4:]
    assert all(p.kind is p.KEYWORD_ONLY for p in knobs), [str(p) for p in knobs]
    assert any(p.name == "grad_clip" for p in knobs)
