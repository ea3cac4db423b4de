"""A checkpoint read at fp32 takes the fp32 masters as its weights, and at 16 bits takes them
back as the masters: a run resumes bit for bit, under plain SGD too (whose masters are all its
state), and a rank's own part folds into its own weights, or into the run's where it has none."""

import numpy as np
from device_helpers import host, on_device

from scratchpar.nn.module import Module, Parameter
from scratchpar.optim import SGD
from scratchpar.optim.mixed import MixedPrecision
from scratchpar.train.precision import AtPrecision
from scratchpar.train.stored import Stored

NAMES = ["w", "b"]


def fold_masters(state: dict) -> dict:
    """``state`` as a run at fp32 reads it."""
    return AtPrecision(Stored.of(state), NAMES, sixteen=False).state()


def unfold_masters(state: dict) -> dict:
    """``state`` as a run at 16 bits reads it."""
    return AtPrecision(Stored.of(state), NAMES, sixteen=True).state()


class Pair(Module):
    def __init__(self, w, b):
        self.w, self.b = Parameter(w), Parameter(b)


def run(steps: range, model=None, optimizer=None):
    """``steps`` of plain SGD in fp16 through masters, each step's gradient drawn from its
    number; small enough that most updates are below half an fp16 ulp of the weight."""
    if model is None:
        start = np.random.default_rng(0)
        model = Pair(on_device(start.standard_normal((3, 4)), np.float16),
                     on_device(start.standard_normal(5), np.float16))
        optimizer = MixedPrecision(SGD(model.parameters(), 1e-3))
    for step in steps:
        gen = np.random.default_rng(step + 1)
        for p in model.parameters():
            p.grad = on_device(gen.standard_normal(p.data.shape), np.float16)
        optimizer.step()
    return model, optimizer


def test_plain_sgd_resumes_its_masters_bitwise():
    straight = run(range(3))[1]
    model, optimizer = run(range(2))
    saved = fold_masters({"model": model.state_dict(), "optim": optimizer.state_dict()})
    assert saved["model"]["w"].dtype == np.float32 and not any("master" in k
                                                               for k in saved["optim"])
    fresh, again = run(range(0))
    restored = unfold_masters(saved)
    fresh.load_state_dict(restored["model"])
    again.load_state_dict(restored["optim"])
    run(range(2, 3), fresh, again)
    for got, want in zip(again.weights(), straight.weights()):
        assert host(got).tobytes() == host(want).tobytes()
    assert host(straight.weights()[0]).tobytes() != host(model.w.data).astype(np.float32).tobytes()


def test_a_ranks_part_folds_into_its_own_weights_or_the_runs():
    def masters(value):
        return {"step_count": 1, "lr": 0.1, "master.0": np.full(2, value, np.float32),
                "master.1": np.full(1, value, np.float32)}

    def weights(value):
        return {"w": np.full(2, value, np.float16), "b": np.full(1, value, np.float16)}

    state = {"model": weights(0), "optim": masters(0.5), "rank1.model": weights(1),
             "rank1.optim": masters(1.5), "rank2.optim": masters(0.5), "meta": {"k": 1}}
    folded = fold_masters(state)
    assert float(folded["model"]["w"][0]) == 0.5 and float(folded["rank1.model"]["b"][0]) == 1.5
    assert "rank2.model" not in folded and folded["meta"] == {"k": 1}
    assert not any(k.startswith("master.") for part in ("optim", "rank1.optim", "rank2.optim")
                   for k in folded[part])
    unfolded = unfold_masters(folded)
    for part, value in (("optim", 0.5), ("rank1.optim", 1.5), ("rank2.optim", 0.5)):
        assert [float(unfolded[part][f"master.{i}"][0]) for i in range(2)] == [value, value]
    assert "master.0" in state["optim"]  # the state folded is left as it was
