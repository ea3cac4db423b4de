"""Deferred initialization: a model built under ``nn.deferred()`` holds no values, draws any
block of any parameter bit for bit as the eager construction made it, leaves the generator
where the eager draws leave it, and refuses arithmetic until it is filled."""

import numpy as np
import pytest
from device_helpers import host, on_device

from scratchpar import nn
from scratchpar.nn.unfilled import UnfilledError, fill, is_unfilled, values
from scratchpar.optim import SGD
from scratchpar.parallel.pieces import Block
from scratchpar.parallel.single import SingleDevice
from scratchpar.train.task import Task

MODELS = {
    "gpt": lambda g: nn.GPT(17, 8, 24, 4, 2, g, dtype=np.float32),
    "gpt-untied": lambda g: nn.GPT(17, 8, 24, 4, 2, g, dtype=np.float32, tie_embeddings=False),
    "mlp": lambda g: nn.MLP([6, 10, 3], g, np.float64),
    "lstm": lambda g: nn.LSTMLanguageModel(11, 8, 12, g, np.float32, n_layers=2),
    "rnn": lambda g: nn.RNNLanguageModel(11, 8, 12, g, np.float64),
    "factorization": lambda g: nn.MatrixFactorization(9, 7, 3, g, np.float32),
    "logistic": lambda g: nn.SparseLogisticRegression(13, g, np.float32),
}


def built(kind: str, deferring: bool):
    gen = np.random.default_rng(7)
    if deferring:
        with nn.deferred():
            return MODELS[kind](gen), gen
    return MODELS[kind](gen), gen


@pytest.mark.parametrize("kind", MODELS)
def test_filled_model_is_the_eager_one_bit_for_bit(kind):
    eager, eager_gen = built(kind, False)
    lazy, lazy_gen = built(kind, True)
    assert all(is_unfilled(p.data) for p in lazy.parameters())
    assert all(not any(p.data.strides) for p in lazy.parameters())  # one element each, shared
    assert lazy_gen.bit_generator.state == eager_gen.bit_generator.state  # later draws align
    fill(lazy.parameters())
    for (name, a), (_, b) in zip(eager.named_parameters(), lazy.named_parameters()):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(host(b.data), host(a.data), err_msg=name)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_a_cast_before_filling_casts_as_the_eager_model_does(dtype):
    eager, _ = built("gpt", False)
    lazy, _ = built("gpt", True)
    eager.to_dtype(dtype)
    lazy.to_dtype(dtype)
    assert all(is_unfilled(p.data) and p.dtype == dtype for p in lazy.parameters())
    fill(lazy.parameters())
    for a, b in zip(eager.parameters(), lazy.parameters()):
        assert b.dtype == dtype
        np.testing.assert_array_equal(host(b.data), host(a.data))


def test_any_block_of_a_parameter_is_the_eager_block():
    eager, _ = built("gpt", False)
    lazy, _ = built("gpt", True)
    name = "blocks.1.attn.qkv.weight"  # (C, 3C), cut by heads as tensor parallelism cuts it
    whole = dict(eager.named_parameters())[name].data
    unfilled = dict(lazy.named_parameters())[name].data
    for block in (Block.flat(whole.shape, 5, 301), Block.cut(whole.shape, (24, 3, 4, 6), 2, 1, 3),
                  Block.full(whole.shape)):
        part = values(unfilled, block)
        assert part.shape == block.shape and part.flags.c_contiguous
        np.testing.assert_array_equal(host(part), host(block.take(whole)))


def test_arithmetic_on_an_unfilled_parameter_is_refused():
    lazy, _ = built("gpt", True)
    with pytest.raises(UnfilledError, match="no values yet"):
        lazy(np.zeros((2, 8), dtype=np.int64))
    weight = lazy.head.weight if hasattr(lazy, "head") else lazy.parameters()[0]
    with pytest.raises(UnfilledError):
        weight.data + 1
    with pytest.raises(UnfilledError):
        weight.data.copy()


def test_a_whole_model_strategy_fills_it_and_trains_as_the_eager_one():
    batch = on_device(np.random.default_rng(1).integers(1, 17, (4, 9)))
    finals = []
    for deferring in (False, True):
        model, _ = built("gpt", deferring)
        task = Task(None, model, "tok")
        strategy = SingleDevice(model, lambda p: SGD(p, lr=0.1), task, None)
        assert not any(is_unfilled(p.data) for p in model.parameters())
        strategy.step(batch)
        finals.append([host(p.data) for p in model.parameters()])
    for a, b in zip(*finals):
        np.testing.assert_array_equal(b, a)


def test_a_state_dict_of_unfilled_arrays_loads_as_drawn():
    eager, _ = built("mlp", False)
    lazy, _ = built("mlp", True)
    target, _ = built("mlp", False)
    for p in target.parameters():
        p.data[...] = 0
    target.load_state_dict(lazy.state_dict())
    for a, b in zip(eager.parameters(), target.parameters()):
        np.testing.assert_array_equal(host(b.data), host(a.data))
