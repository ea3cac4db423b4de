"""The models against PyTorch (where installed): the same parameters, the same logits and grads."""

import numpy as np
import pytest
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from nn_helpers import MAX_LEN, SOME, VOCAB, make_model

from scratchpar.nn import lm_loss

torch = pytest.importorskip("torch")
TF = torch.nn.functional

seeds = st.integers(0, 2**31 - 1)


def torch_params(model) -> dict:
    return {name: torch.tensor(host(p.data), dtype=torch.float64, requires_grad=True)
            for name, p in model.named_parameters()}


def torch_layer_norm(x, p, prefix):
    return TF.layer_norm(x, x.shape[-1:], p[prefix + ".weight"], p[prefix + ".bias"], eps=1e-5)


def torch_gpt(p, ids, n_layers, n_heads):
    """GPT-2 in plain torch ops, reading the scratchpar parameter names."""
    b, t = ids.shape
    x = p["tok.weight"][ids] + p["pos.weight"][:t]
    c = x.shape[-1]
    for i in range(n_layers):
        pre = f"blocks.{i}."
        h = torch_layer_norm(x, p, pre + "ln1")
        qkv = h @ p[pre + "attn.qkv.weight"] + p[pre + "attn.qkv.bias"]
        q, k, v = qkv.reshape(b, t, 3, n_heads, c // n_heads).permute(2, 0, 3, 1, 4)
        y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d)
        y = y.transpose(1, 2).reshape(b, t, c)
        x = x + y @ p[pre + "attn.proj.weight"] + p[pre + "attn.proj.bias"]
        h = torch_layer_norm(x, p, pre + "ln2")
        h = TF.gelu(h @ p[pre + "mlp.0.weight"] + p[pre + "mlp.0.bias"], approximate="tanh")
        x = x + h @ p[pre + "mlp.2.weight"] + p[pre + "mlp.2.bias"]
    return torch_layer_norm(x, p, "ln_f") @ p["head.weight"]


def torch_recurrent(p, ids, kind):
    """torch.nn.RNN / LSTM with W_ih = layers.0.input.weightᵀ, W_hh = layers.0.recurrentᵀ (gates
    i, f, g, o)."""
    emb = p["embed.weight"][ids]
    d_embed, width = p["layers.0.input.weight"].shape
    hidden = p["layers.0.recurrent"].shape[0]
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.RNN
    layer = cls(d_embed, hidden, batch_first=True, dtype=torch.float64)
    del layer.weight_ih_l0, layer.weight_hh_l0, layer.bias_ih_l0, layer.bias_hh_l0
    layer.weight_ih_l0 = p["layers.0.input.weight"].T
    layer.weight_hh_l0 = p["layers.0.recurrent"].T
    layer.bias_ih_l0 = p["layers.0.input.bias"]
    layer.bias_hh_l0 = torch.zeros(width, dtype=torch.float64)
    hs, _ = layer(emb)
    return hs @ p["head.weight"] + p["head.bias"]


@SOME
@given(kind=st.sampled_from(["gpt", "rnn", "lstm"]), seed=seeds, b=st.integers(1, 3),
       data=st.data())
def test_logits_and_loss_grads_match_torch(kind, seed, b, data):
    model = make_model(kind, seed)
    rng = np.random.default_rng(seed)
    batch = rng.integers(1, VOCAB, size=(b, MAX_LEN + 1))
    batch[0, data.draw(st.integers(2, MAX_LEN + 1)):] = 0  # padding in the first row
    params = torch_params(model)
    ids = torch.tensor(batch[:, :-1])
    logits = (torch_gpt(params, ids, 1, 2) if kind == "gpt"
              else torch_recurrent(params, ids, kind))
    np.testing.assert_allclose(host(model(on_device(batch[:, :-1])).data), logits.detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    targets = torch.tensor(batch[:, 1:].reshape(-1))
    ref = TF.cross_entropy(logits.reshape(-1, VOCAB), targets, ignore_index=0)
    loss = lm_loss(model, on_device(batch))
    np.testing.assert_allclose(host(loss.data), ref.item(), rtol=1e-11)
    ref.backward()
    loss.backward()
    for name, p in model.named_parameters():
        expected = params[name].grad
        expected = np.zeros(p.shape) if expected is None else expected.numpy()
        np.testing.assert_allclose(host(p.grad), expected, rtol=1e-9, atol=1e-12, err_msg=name)
