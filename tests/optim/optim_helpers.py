"""What the optimizer tests share: Hypothesis settings and the PyTorch cross-check."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# The ``xp`` fixture is function-scoped but stateless (the device's array module), so examples
# may share it.
ON_XP = settings(max_examples=30, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


def assert_matches_torch(make_ours, torch_name: str, kwargs: dict, steps: int, skipped, seed: int):
    """Step our optimizer and ``torch.optim.<torch_name>`` on the same parameters and gradients
    (parameter 1 gets none at the steps in ``skipped``); the parameters must stay equal."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    shapes = [(4, 3), (3,), (2, 2, 2)]
    theta = [rng.standard_normal(s) for s in shapes]
    ours = [SimpleNamespace(data=t.copy(), grad=None) for t in theta]
    theirs = [torch.tensor(t, requires_grad=True) for t in theta]
    opt, ref = make_ours(ours, **kwargs), getattr(torch.optim, torch_name)(theirs, **kwargs)
    for step in range(steps):
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            g = None if (i == 1 and step in skipped) else rng.standard_normal(shapes[i])
            a.grad = g
            b.grad = None if g is None else torch.tensor(g)
        opt.step()
        ref.step()
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-6, atol=1e-12)
