"""Adam and AdamW with the fused ops on (``scratchpar/kernels``: on a GPU every parameter in
one launch, ``kernels/adam_many.py``, mixed precision's masters and loss scale in it) against
the plain update, bit for bit: parameters, moments and masters after steps with L2 or
decoupled decay, in float64, fp32 and fp16 with fp32 masters. On the CPU and the double the
switch must leave the plain update in place; ``--device cuda`` checks the kernel itself."""

from types import SimpleNamespace

import numpy as np
import pytest

from scratchpar import kernels
from scratchpar.backend import to_host
from scratchpar.optim import Adam, AdamW
from scratchpar.optim.mixed import MixedPrecision
from scratchpar.optim.scaler import LossScaler


def stepped(make, mode: str, dtype, xp):
    rng = np.random.default_rng(11)
    shapes = [(5, 3), (7,), (2, 3, 4)]
    params = [SimpleNamespace(data=xp.asarray(rng.standard_normal(s), dtype), grad=None)
              for s in shapes]
    with kernels.using(mode):
        opt = make(params)
        for _ in range(4):
            for p in params:
                p.grad = xp.asarray(rng.standard_normal(p.data.shape), dtype)
            opt.step()
    moments = [to_host(s[k]) for s in opt.state for k in ("exp_avg", "exp_avg_sq", "master")
               if k in s]
    return [to_host(p.data) for p in params] + moments


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("make", [
    lambda ps: Adam(ps, lr=1e-2, weight_decay=0.1),
    lambda ps: AdamW(ps, lr=1e-2, weight_decay=0.1, betas=(0.8, 0.99)),
    lambda ps: AdamW(ps, lr=3e-3, weight_decay=0.0)], ids=["adam-l2", "adamw", "adamw-no-decay"])
def test_the_fused_update_is_the_plain_update_bit_for_bit(make, dtype, xp):
    fused, plain = stepped(make, "on", dtype, xp), stepped(make, "off", dtype, xp)
    assert len(fused) == 9
    for got, want in zip(fused, plain):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("make", [lambda ps: Adam(ps, lr=1e-2, weight_decay=0.1),
                                  lambda ps: AdamW(ps, lr=1e-2, weight_decay=0.1)],
                         ids=["adam-l2", "adamw"])
def test_mixed_precision_s_fused_update_is_the_plain_update_bit_for_bit(make, xp):
    def mixed(ps):
        return MixedPrecision(make(ps), LossScaler(256.0))

    fused, plain = stepped(mixed, "on", np.float16, xp), stepped(mixed, "off", np.float16, xp)
    assert len(fused) == 12  # three parameters, three moments' pairs, three masters
    for got, want in zip(fused, plain):
        np.testing.assert_array_equal(got, want)
