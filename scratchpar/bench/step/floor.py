"""The floor: an MLP training step written out by hand in NumPy or CuPy, with no autograd at all."""

from __future__ import annotations

from ...backend import get_array_module


class HandMLP:
    """(B, D) → (B, C): Linear–ReLU stacks, forward and backward by hand, SGD in place.

    Holds copies of the weights W (D_in, D_out) and biases b (D_out,) of each layer, so it
    starts from the same point as the model it was copied from and then trains on its own. The
    arrays' module ``xp`` does the math, so the floor runs on the host or on a device alike.
    """

    def __init__(self, weights: list, biases: list, lr: float):
        self.weights = [w.copy() for w in weights]
        self.biases = [b.copy() for b in biases]
        self.lr = lr
        self.grads: list = []

    def loss_and_grads(self, x, y) -> float:
        """Mean softmax cross-entropy (read on the host: a sync on a device); leaves
        [gW₀, gb₀, gW₁, …] in ``self.grads``."""
        return float(self._forward_backward(x, y))

    def _forward_backward(self, x, y):
        """The loss as a 0-d array of ``xp``, and the gradients in ``self.grads``."""
        xp = get_array_module(x)
        n = x.shape[0]
        rows = xp.arange(n)
        acts = [x]  # the input of each layer; ReLU outputs double as their own masks
        for w, b in zip(self.weights[:-1], self.biases[:-1]):
            h = acts[-1] @ w  # (B, D_out)
            h += b
            h *= h > 0  # ReLU in place
            acts.append(h)
        z = acts[-1] @ self.weights[-1]  # (B, C) logits
        z += self.biases[-1]
        z -= z.max(axis=1, keepdims=True)  # shift for stability
        picked = z[rows, y]  # (B,)
        xp.exp(z, out=z)
        total = z.sum(axis=1, keepdims=True)  # (B, 1)
        loss = xp.mean(xp.log(total[:, 0]) - picked)
        z /= total  # softmax
        z[rows, y] -= 1
        z *= 1.0 / n  # g = (softmax − onehot) / B: the fused softmax-xent gradient
        grads, g = [], z
        for i in reversed(range(len(self.weights))):
            grads += [g.sum(axis=0), acts[i].T @ g]  # gb, gW
            if i > 0:
                g = g @ self.weights[i].T  # (B, D_in)
                g *= acts[i] > 0  # through the ReLU
        self.grads = grads[::-1]
        return loss

    def step(self, x, y) -> None:
        """One training step: forward, backward and θ ← θ − lr·g in place (no host read)."""
        self._forward_backward(x, y)
        for p, g in zip([t for wb in zip(self.weights, self.biases) for t in wb], self.grads):
            g *= self.lr  # the gradient is dropped after the step: scale it in place
            p -= g
