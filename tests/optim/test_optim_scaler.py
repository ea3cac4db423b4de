"""The dynamic loss scale's rules on scripted overflows: halve and skip on an overflow, double
after a run of applied steps, a floor below which an overflow is no longer forgiven; and the
loss that carries it, whose value is the loss and whose gradient is S times the gradient."""

import numpy as np
import pytest
from device_helpers import host, on_device

from scratchpar.autograd import Tensor
from scratchpar.optim.scaler import LossScaler, ScaleGrad, scaled


def test_the_scale_follows_a_script_of_overflows():
    scaler = LossScaler(scale=2.0**10, growth_interval=3, min_scale=2.0**8)
    script = [True, True, False, True, True, True, True, False, False, False, True]
    seen = []
    for applied in script:
        if applied:
            scaler.applied()
            seen.append(scaler.scale)
        else:
            seen.append((scaler.overflowed(), scaler.scale))
    assert seen == [
        2.0**10, 2.0**10,  # two applied steps: not yet three in a row
        (True, 2.0**9),  # an overflow halves and restarts the count
        2.0**9, 2.0**9, 2.0**10,  # three applied in a row: doubled
        2.0**10,
        (True, 2.0**9), (True, 2.0**8),  # halved down to the floor
        (False, 2.0**8),  # at the floor an overflow is not the scale's fault
        2.0**8]
    assert scaler.clean == 1


def test_the_state_round_trips_and_bad_state_is_refused():
    scaler = LossScaler(scale=64.0, growth_interval=5)
    scaler.applied()
    twin = LossScaler(growth_interval=5)
    twin.load_state_dict(scaler.state_dict())
    assert (twin.scale, twin.clean) == (64.0, 1)
    with pytest.raises(ValueError, match="out of range"):
        twin.load_state_dict({"scale": 0.5, "clean": 0})
    with pytest.raises(ValueError, match="out of range"):
        twin.load_state_dict({"scale": 8.0, "clean": 5})
    with pytest.raises(ValueError, match="min_scale"):
        LossScaler(scale=0.5)


def test_a_scaled_loss_keeps_its_value_and_multiplies_its_gradient(xp):
    x = Tensor(on_device(np.array([0.5, -2.0, 3.0])), requires_grad=True)
    loss = scaled((x * x).sum(), LossScaler(scale=1024.0))
    loss.backward()
    assert loss.item() == pytest.approx(13.25)
    np.testing.assert_array_equal(host(x.grad), 1024.0 * 2 * np.array([0.5, -2.0, 3.0]))
    assert scaled(loss, None) is loss
    assert loss._ctx.fn is ScaleGrad
