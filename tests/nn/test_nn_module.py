"""Module: parameter naming, tied parameters, state dicts, train/eval and zero_grad."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from nn_helpers import MODEL_KINDS, SOME, VOCAB, check_module, make_model

from scratchpar.autograd import Tensor
from scratchpar.device_rng import DeviceRandom
from scratchpar.nn import (
    GPT,
    Dropout,
    Linear,
    Module,
    ModuleList,
    Parameter,
    ReLU,
    Sequential,
    set_dropout_generator,
)

seeds = st.integers(0, 2**31 - 1)


def gpt_config_count(v, max_len, c, n_layers):
    """Parameter count of the GPT by hand: embeddings, blocks, final norm, bias-free head."""
    attn = (c * 3 * c + 3 * c) + (c * c + c)  # qkv and proj, with biases
    mlp = (c * 4 * c + 4 * c) + (4 * c * c + c)
    block = 2 * c + attn + 2 * c + mlp  # two layer norms
    return v * c + max_len * c + n_layers * block + 2 * c + c * v


def test_gpt_parameter_names_are_the_checkpoint_keys():
    model = GPT(7, 5, d_model=4, n_heads=2, n_layers=2, gen=np.random.default_rng(0))
    names = [name for name, _ in model.named_parameters()]
    block = ["ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
             "attn.proj.bias", "ln2.weight", "ln2.bias", "mlp.0.weight", "mlp.0.bias",
             "mlp.2.weight", "mlp.2.bias"]
    expected = (["tok.weight", "pos.weight"] + [f"blocks.{i}.{n}" for i in range(2) for n in block]
                + ["ln_f.weight", "ln_f.bias", "head.weight"])
    assert names == expected
    assert model.num_parameters() == gpt_config_count(7, 5, 4, 2)
    assert sum(p.size for p in model.parameters()) == model.num_parameters()


@SOME
@given(kind=st.sampled_from(MODEL_KINDS), seed=seeds)
def test_named_parameters_are_deterministic_and_unique(kind, seed):
    a, b = make_model(kind, seed, perturbed=False), make_model(kind, seed, perturbed=False)
    named_a, named_b = list(a.named_parameters()), list(b.named_parameters())
    assert [n for n, _ in named_a] == [n for n, _ in named_b]
    assert len({n for n, _ in named_a}) == len(named_a)
    assert len({id(p) for _, p in named_a}) == len(named_a)
    for (_, p), (_, q) in zip(named_a, named_b, strict=True):
        # the same seed, the same initialization
        np.testing.assert_array_equal(host(p.data), host(q.data))
    assert [n for n, _ in named_a] == [n for n, _ in a.named_parameters()]  # stable on re-walk


class Tied(Module):
    """Two linear maps sharing one weight: ``b.weight is a.weight``."""

    def __init__(self, gen):
        self.a = Linear(3, 3, gen, dtype=np.float64)
        self.b = Linear(3, 3, gen, dtype=np.float64)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x).tanh())


def test_tied_parameter_appears_once_and_gets_both_gradients():
    rng = np.random.default_rng(0)
    model = Tied(rng)
    for p in model.parameters():
        p.data += on_device(0.3 * rng.standard_normal(p.shape))
    assert [n for n, _ in model.named_parameters()] == ["a.weight", "a.bias", "b.bias"]
    assert list(model.state_dict()) == ["a.weight", "a.bias", "b.bias"]
    x = Tensor(on_device(rng.standard_normal((2, 3))), requires_grad=True)
    check_module(model, model, [x])  # the tied weight's grad sums both uses
    w = model.a.weight
    model.zero_grad()
    h = np.tanh(x.data @ w.data + model.a.bias.data)
    ones = on_device(np.ones((2, 3)))
    model(x).backward(ones)
    via_b = h.T @ ones
    assert np.abs(host(w.grad - via_b)).max() > 1e-3  # so the first use contributed as well


def test_state_dict_round_trip_is_exact_and_in_place():
    src = make_model("gpt", 1)
    dst = make_model("gpt", 2)
    ids = on_device(np.random.default_rng(0).integers(0, VOCAB, (2, 4)))
    assert not np.array_equal(host(src(ids).data), host(dst(ids).data))
    live = src.state_dict()
    for name, p in src.named_parameters():
        assert live[name] is p.data  # the live arrays, not copies
    saved = {k: v.copy() for k, v in live.items()}
    before = {name: (p, p.data) for name, p in dst.named_parameters()}
    dst.load_state_dict(saved)
    for name, p in dst.named_parameters():
        assert before[name][0] is p and before[name][1] is p.data  # copied into, not replaced
        np.testing.assert_array_equal(host(p.data), host(saved[name]))
    np.testing.assert_array_equal(host(dst(ids).data), host(src(ids).data))
    for v in saved.values():
        v += 1.0  # the model holds no reference to the loaded arrays
    np.testing.assert_array_equal(host(dst(ids).data), host(src(ids).data))


def test_load_state_dict_casts_to_the_parameter_dtype():
    model = Linear(2, 3, np.random.default_rng(0))  # float32
    model.load_state_dict({"weight": np.full((2, 3), 0.1), "bias": np.arange(3.0)})
    assert model.weight.dtype == np.float32 and model.bias.dtype == np.float32
    np.testing.assert_array_equal(host(model.weight.data),
                                  np.full((2, 3), 0.1, dtype=np.float32))


def test_load_state_dict_names_every_problem_and_changes_nothing():
    model = make_model("lstm", 0)
    original = {k: v.copy() for k, v in model.state_dict().items()}
    bad = {k: v.copy() + 1.0 for k, v in original.items()}
    del bad["head.bias"]
    bad["head.extra"] = np.zeros(3)
    bad["layers.0.recurrent"] = np.zeros((2, 2))
    with pytest.raises(ValueError) as err:
        model.load_state_dict(bad)
    message = str(err.value)
    assert "missing head.bias" in message
    assert "unexpected head.extra" in message
    assert "layers.0.recurrent: shape (2, 2) != (3, 12)" in message
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(host(v), host(original[k]))  # all-or-nothing


def all_modes(model):
    return {name: m.training for name, m in model.named_modules()}


def test_train_and_eval_reach_every_submodule():
    model = GPT(VOCAB, 4, d_model=4, n_heads=2, n_layers=2, gen=np.random.default_rng(0),
                dropout=0.5, dtype=np.float64)
    modes = all_modes(model)
    assert len(modes) > 10 and all(modes.values())
    assert "blocks.1.mlp.3" in modes  # the Dropout inside a Sequential inside a ModuleList
    assert model.eval() is model
    assert not any(all_modes(model).values())
    assert model.train() is model
    assert all(all_modes(model).values())
    model.blocks.eval()
    assert not model.blocks[1].mlp[3].training and model.training


def test_eval_turns_dropout_off_everywhere():
    kwargs = dict(vocab_size=VOCAB, max_len=4, d_model=4, n_heads=2, n_layers=1,
                  dtype=np.float64)
    with_drop = GPT(gen=np.random.default_rng(3), dropout=0.5, **kwargs)
    without = GPT(gen=np.random.default_rng(3), dropout=0.0, **kwargs)
    set_dropout_generator(with_drop, DeviceRandom(4))
    drops = [m for _, m in with_drop.named_modules() if isinstance(m, Dropout)]
    assert len(drops) == 3 and all(d.gen is drops[0].gen for d in drops)
    ids = np.random.default_rng(5).integers(0, VOCAB, (2, 4))
    assert not np.allclose(host(with_drop(ids).data),
                           host(without(ids).data))  # training: masks applied
    with_drop.eval()
    np.testing.assert_array_equal(host(with_drop(ids).data), host(without(ids).data))


def test_dropout_without_a_generator_refuses_to_train():
    layer = Dropout(0.5)
    with pytest.raises(RuntimeError, match="generator"):
        layer(Tensor(np.ones(3)))
    layer.eval()
    np.testing.assert_array_equal(layer(Tensor(np.ones(3))).data, np.ones(3))


def test_zero_grad_clears_every_gradient():
    model = make_model("rnn", 0)
    model(on_device(np.array([[1, 2, 3]]))).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_module_list_and_sequential():
    rng = np.random.default_rng(0)
    layers = [Linear(2, 3, rng, dtype=np.float64), ReLU(), Linear(3, 1, rng, dtype=np.float64)]
    seq = Sequential(*layers)
    assert len(seq) == 3 and list(seq) == layers and seq[2] is layers[2] and seq[-1] is layers[2]
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = Tensor(on_device(rng.standard_normal((4, 2))))
    expected = layers[2](layers[1](layers[0](x))).data
    np.testing.assert_array_equal(host(seq(x).data), host(expected))
    lst = ModuleList(layers[::-1])
    assert [n for n, _ in lst.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert lst[0] is layers[2]


def test_parameter_is_a_grad_leaf():
    p = Parameter(on_device(np.zeros(3)))
    assert p.requires_grad and p.is_leaf and p.grad is None
