"""The step of strategies whose workers meet at one place: a parameter server, EASGD's master,
Hogwild's shared parameters.

A worker's own step is its compute on its rows, its update and its own messages. The place
they meet serves every worker in turn, so a step also lasts at least one round of that
service: the busiest server's W pushes in and W pulls out, α + n·β each one after another on
its link, and its updates (Li et al. 2014, §3: the server's bytes, 2·W·s·Ψ/S a step, against
a ring all-reduce's 2(p − 1)/p·sΨ per rank). A synchronous server's round follows the
workers' compute; asynchronous workers go on while it serves, so the step is the longer of
the two (Dean et al. 2012, §4.1: Downpour's server applies each push as it comes).
"""

from __future__ import annotations

import dataclasses

from .messages import communication
from .step import Prediction, update_s


def parameter_server(description, shape, compute: tuple[float, float], workers: int,
                     servers: int, mode: str, profile, across_nodes: bool = False) -> Prediction:
    """A parameter server's step: ``description`` is the busiest server's messages (its W
    pushes and pulls), ``mode`` sync, ssp or async; each worker runs ``compute`` on its rows."""
    forward, backward = compute
    axes = frozenset({"workers", "servers"}) if across_nodes else frozenset()
    served = communication(description, {"workers": workers, "servers": servers}, profile, axes)
    owned = -(-shape.psi // servers)  # K_s, in parameters
    keys = owned * shape.itemsize  # in bytes
    one_update = update_s(dataclasses.replace(description, holds={  # its range, one flat array
        "parameters": keys, "gradients": keys, "optimizer": shape.k * owned},
        arrays=shape.per_array), profile)
    if mode == "sync":  # one combined update a step, after every worker's push
        return Prediction(forward, backward, one_update, served, sum(served.values()))
    own = servers * sum(served.values()) / workers  # a worker's share: its messages to S servers
    busy = sum(served.values()) + workers * one_update  # the server: every push applied
    return _bounded(forward, backward, 0.0, own, busy, served)


def master(description, compute: tuple[float, float], workers: int, profile,
           across_nodes: bool = False) -> Prediction:
    """Asynchronous EASGD (and its round-robin): each worker's step is its compute, its update
    and its messages (a header, and x out and x − x̃ back every τ steps, Zhang et al. 2015,
    Algorithm 1); the master answers every worker's messages one after another, each with an
    elastic update of the centre: three reads and a write of sΨ."""
    forward, backward = compute
    axes = frozenset({"world"}) if across_nodes else frozenset()
    own = communication(description, {"world": workers + 1}, profile, axes)
    update = update_s(description, profile)
    exchanges = sum(m.count for m in description.sends if m.op == "send")
    centre = 4 * description.holds["parameters"] * exchanges / profile.device.bytes_per_s
    busy = workers * (sum(own.values()) + centre)
    return _bounded(forward, backward, update, sum(own.values()), busy, own)


def hogwild(description, compute: tuple[float, float], workers: int, profile) -> Prediction:
    """Hogwild's step (Niu et al. 2011): each worker reads θ, computes, and writes −γg into θ
    unlocked, through the node's shared memory (loads and stores: no message) or a one-sided
    window (a Get behind forward, an Accumulate after backward). The node's memory serves every
    worker's update: W updates' bytes at its bandwidth bound the step."""
    forward, backward = compute
    own = communication(description, {"world": workers}, profile)
    update = update_s(description, profile)
    exposed = max(0.0, own.get("forward", 0.0) - forward) + own.get("", 0.0)
    return _bounded(forward, backward, update, exposed, workers * update, own)


def _bounded(forward: float, backward: float, update: float, own: float, busy: float,
             communication_s: dict[str, float]) -> Prediction:
    """A worker's step of its compute, update and ``own`` exposed messages, held to at least
    ``busy``, the round of the place it meets the others at: the wait is idle time."""
    alone = Prediction(forward, backward, update, communication_s, own)
    return dataclasses.replace(alone, idle_s=max(0.0, busy - alone.step_s))
