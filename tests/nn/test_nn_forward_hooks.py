"""Module forward hooks: before(module) runs ahead of forward; after(module, out) replaces out."""

import numpy as np
from device_helpers import host, on_device

from scratchpar.nn import Linear


def test_hooks_run_around_forward_and_can_be_removed():
    layer = Linear(3, 2, np.random.default_rng(0), dtype=np.float64)
    x = on_device(np.ones((4, 3)))
    calls = []
    layer.set_forward_hooks(lambda m: calls.append(("before", m)),
                            lambda m, out: calls.append(("after", m)) or out * 2.0)
    hooked = layer(x)
    assert calls == [("before", layer), ("after", layer)]
    layer.set_forward_hooks(None, None)
    plain = layer(x)
    np.testing.assert_array_equal(host(hooked.data), 2.0 * host(plain.data))
    assert len(calls) == 2
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]
