"""A convex problem with a known optimum, shared by the asynchronous strategies' convergence
tests: multinomial logistic regression, its optimum L* by full-batch gradient descent, and serial
SGD's loss after the same batches."""

import numpy as np
from device_helpers import host, on_device

from scratchpar import nn
from scratchpar.optim import SGD
from scratchpar.parallel import SingleDevice
from scratchpar.train.task import Task

N, D, C, BATCH, STEPS, LR = 240, 5, 3, 24, 60, 0.5


def problem():
    """N points in D dimensions, labels drawn from a softmax of a random linear model."""
    gen = np.random.default_rng(11)
    x = gen.standard_normal((N, D))
    logits = x @ gen.standard_normal((D, C))
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.array([gen.choice(C, p=row) for row in p])
    return x, y


def loss_of(w, b, x, y) -> float:
    z = x @ w + b  # (N, C)
    z = z - z.max(1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y]))


def optimum(x, y) -> float:
    """L*: full-batch gradient descent to convergence (the loss is convex, smooth)."""
    w, b = np.zeros((D, C)), np.zeros(C)
    for _ in range(3000):
        z = x @ w + b
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(y)), y] -= 1.0  # ∂L/∂z · N
        w, b = w - 1.0 * x.T @ p / len(y), b - 1.0 * p.mean(0)
    return loss_of(w, b, x, y)


def task() -> Task:
    return Task(None, nn.MLP([D, C], np.random.default_rng(3), np.float64), "sample")


def batches(x, y):
    gen = np.random.default_rng(5)
    for _ in range(STEPS):
        rows = gen.choice(N, BATCH, replace=False)
        yield on_device(x[rows], np.float64), on_device(y[rows])


def final_loss(params, x, y) -> float:
    weight, bias = (host(p) for p in params)
    return loss_of(weight, bias, x, y)


def serial_run(x, y) -> float:
    """Serial SGD's full-data loss after the same batches."""
    one = task()
    single = SingleDevice(one.model, lambda params: SGD(params, LR), one)
    for batch in batches(x, y):
        single.step(batch)
    return final_loss([p.data for p in one.model.parameters()], x, y)
