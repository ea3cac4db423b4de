"""pipeline_layers(): composed in order they are the model, in value and in every gradient."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import example, given
from hypothesis import strategies as st
from nn_helpers import FEW, VOCAB, perturb

from scratchpar.autograd import Tensor, grad_check
from scratchpar.nn import GPT, MLP, LSTMLanguageModel, RNNLanguageModel, Sequential
from scratchpar.nn.layers import Linear

KINDS = ("gpt", "gpt-tied", "rnn-1", "rnn-3", "lstm-1", "lstm-3", "mlp")
MLP_SIZES = [3, 8, 8, 2]
seeds = st.integers(0, 2**32 - 1)


def build(kind: str, seed: int):
    """A float64 model with perturbed parameters and an example input for it."""
    gen = np.random.default_rng(seed)
    if kind == "mlp":
        model = MLP(MLP_SIZES, gen, dtype=np.float64)
        x = Tensor(on_device(gen.standard_normal((32, MLP_SIZES[0]))))  # rows: no dead layer
    else:
        if kind.startswith("gpt"):
            model = GPT(VOCAB, 5, d_model=4, n_heads=2, n_layers=2, gen=gen, dtype=np.float64,
                        tie_embeddings=kind == "gpt-tied")
        else:
            name, n_layers = kind.split("-")
            cls = LSTMLanguageModel if name == "lstm" else RNNLanguageModel
            model = cls(VOCAB, 3, 4, gen, dtype=np.float64, n_layers=int(n_layers))
        x = on_device(gen.integers(0, VOCAB, (2, 5)))
    return perturb(model, np.random.default_rng(seed + 1)), x


def compose(layers, x):
    for layer in layers:
        x = layer(x)
    return x


def grads_of(model, run, weights) -> list:
    """Host copies of every parameter's gradient of Σ weights ⊙ run()."""
    model.zero_grad()
    (run() * weights).sum().backward()
    return [np.array(host(p.grad)) for p in model.parameters()]


@FEW
@pytest.mark.parametrize("kind", KINDS)
@given(seed=seeds)
def test_composed_layers_are_the_model_bitwise(kind, seed):
    model, x = build(kind, seed)
    layers = model.pipeline_layers()
    out = model(x)
    np.testing.assert_array_equal(host(compose(layers, x).data), host(out.data))
    weights = on_device(np.random.default_rng(seed + 2).standard_normal(out.shape))
    whole = grads_of(model, lambda: model(x), weights)
    composed = grads_of(model, lambda: compose(layers, x), weights)
    for (name, _), a, b in zip(model.named_parameters(), whole, composed):
        assert np.abs(a).max() > 0, name
        np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("kind", KINDS)
def test_layers_hold_exactly_the_model_parameters(kind):
    model, _ = build(kind, 0)
    held = {id(p) for layer in model.pipeline_layers() for p in layer.parameters()}
    assert held == {id(p) for p in model.parameters()}


@pytest.mark.parametrize("kind, count", [("gpt", 4), ("rnn-1", 3), ("lstm-3", 5), ("mlp", 3)])
def test_layer_counts_and_kinds(kind, count):
    model, _ = build(kind, 0)
    layers = model.pipeline_layers()
    assert len(layers) == count
    if kind == "mlp":
        assert all(isinstance(layer, Sequential) and len(layer) == 2 for layer in layers[:-1])
        assert isinstance(layers[-1], Linear)


@pytest.mark.parametrize("cls, gates", [(RNNLanguageModel, 1), (LSTMLanguageModel, 4)])
def test_stacked_recurrent_layers_take_the_hidden_states(cls, gates):
    model = cls(VOCAB, 3, 4, np.random.default_rng(0), dtype=np.float64, n_layers=3)
    shapes = [tuple(layer.input.weight.shape) for layer in model.layers]
    assert shapes == [(3, gates * 4), (4, gates * 4), (4, gates * 4)]
    assert [name for name, _ in model.named_parameters()][:4] == [
        "embed.weight", "layers.0.input.weight", "layers.0.input.bias", "layers.0.recurrent"]
    with pytest.raises(ValueError, match="n_layers must be at least 1"):
        cls(VOCAB, 3, 4, np.random.default_rng(0), n_layers=0)


def test_tied_head_is_the_embedding_parameter_once():
    model, _ = build("gpt-tied", 0)
    first, last = model.pipeline_layers()[0], model.pipeline_layers()[-1]
    assert any(p is model.tok.weight for p in first.parameters())
    assert any(p is model.tok.weight for p in last.parameters())
    names = [name for name, _ in model.named_parameters()]
    assert names.count("tok.weight") == 1 and not any(n.startswith("head") for n in names)
    assert model.num_parameters() == build("gpt", 0)[0].num_parameters() - VOCAB * 4


@FEW
@given(seed=seeds)
@example(seed=20360)  # gradients up to 78: central differences err by 5e-5 in absolute terms
def test_tied_gradient_is_the_sum_of_both_uses(seed):
    tied, ids = build("gpt-tied", seed)
    untied, _ = build("gpt", seed)
    state = {k: host(v) for k, v in tied.state_dict().items()}
    untied.load_state_dict({**state, "head.weight": state["tok.weight"].T})
    np.testing.assert_allclose(host(tied(ids).data), host(untied(ids).data), rtol=1e-12,
                               atol=1e-14)
    weights = on_device(np.random.default_rng(seed).standard_normal((*ids.shape, VOCAB)))
    (tied(ids) * weights).sum().backward()
    (untied(ids) * weights).sum().backward()
    both = host(untied.tok.weight.grad) + host(untied.head.weight.grad).T  # (V, C)
    np.testing.assert_allclose(host(tied.tok.weight.grad), both, rtol=1e-10, atol=1e-12)
    # the sum above is exact to 1e-10; central differences of this model err by up to 5e-5
    # where its gradients reach 78 (the example above), so the numeric check's bound is absolute
    grad_check(lambda w: tied(ids), [tied.tok.weight], atol=1e-4)
