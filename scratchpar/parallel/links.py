"""The two ends of a tensor crossing between ranks as non-blocking messages: each carries the
activation one way and its gradient back, under one tag (the send ↔ recv duals' links)."""

from __future__ import annotations

from ..backend import get_array_module, xp_default
from ..comm.errors import CommError


class Link:
    """One tensor crossing between this rank and ``peer`` on ``comm``, and its gradient crossing
    back, as non-blocking messages: ``request`` is the tensor's, ``grad_request`` the
    gradient's once posted. Both use ``tag`` (in ``0..comm.tag_ub``, from ``comm.tag(n)``):
    they travel in opposite directions."""

    def __init__(self, comm, peer: int, tag: int = 0):
        self.comm, self.peer, self.tag = comm, peer, tag
        self.request = self.grad_request = self.grad = None

    def wait(self) -> None:
        """Until the tensor's message is complete: sent, or received into the tensor."""
        self.comm.wait(self.request)


class Outgoing(Link):
    """The sender's end (GPipe's activation out, its gradient in: Huang et al. 2019, §2.2)."""

    def send(self, x) -> None:
        xp = get_array_module(x)
        self.buf = xp.ascontiguousarray(x)  # read by MPI until the send completes
        self.shape, self.dtype, self.xp = x.shape, x.dtype, xp
        self.request = self.comm.isend(self.buf, self.peer, self.tag)

    def expect(self):
        """Post the gradient's receive now, if not yet; returns its request."""
        if self.grad_request is None:
            self.grad = self.xp.empty(self.shape, self.dtype)
            self.grad_request = self.comm.irecv(self.grad, self.peer, self.tag)
        return self.grad_request

    def gradient(self):
        """The gradient, once its message is in (posting its receive first if need be), handed
        over: the link keeps no reference, so it goes with the backward that takes it."""
        self.comm.wait(self.expect())
        grad, self.grad = self.grad, None
        return grad


class Incoming(Link):
    """The receiver's end: the tensor in, and its gradient out as soon as backward gives it."""

    def receive(self, shape, dtype):
        out = xp_default().empty(shape, dtype)  # written by MPI until the receive completes
        self.request = self.comm.irecv(out, self.peer, self.tag)
        return out

    def give(self, g) -> None:
        self.grad = get_array_module(g).ascontiguousarray(g)
        self.send_grad()

    def send_grad(self):
        """Post the gradient's send, if not yet; returns its request."""
        if self.grad_request is None:
            if self.grad is None:
                raise CommError(f"the gradient for rank {self.peer} (tag {self.tag}) is not "
                                "computed: the received tensor's backward has not run")
            self.grad_request = self.comm.isend(self.grad, self.peer, self.tag)
        return self.grad_request


class Blocking(Incoming):
    """:func:`recv`'s end: backward waits until the gradient has gone."""

    def give(self, g) -> None:
        super().give(g)
        self.comm.wait(self.grad_request)


class Held(Incoming):
    """An end whose gradient waits for :meth:`send_grad` (a runtime that sends every message
    where its schedule places it)."""

    def give(self, g) -> None:
        self.grad = get_array_module(g).ascontiguousarray(g)


class HandOff:
    """Both ends on one rank (consecutive virtual stages of one rank): the tensor and its
    gradient change hands, copied, without a message."""

    request = grad_request = grad = None

    def send(self, x) -> None:
        self.tensor = x.copy()

    def receive(self, shape, dtype):
        return self.tensor

    def give(self, g) -> None:
        self.grad = g.copy()  # its own array: the sender's backward scales it in place

    def gradient(self):
        if self.grad is None:
            raise CommError("a hand-off's gradient is wanted before its receiver's backward ran")
        return self.grad

    def wait(self) -> None:
        """Nothing is in flight."""

    def expect(self) -> None:
        """Nothing to post."""

    def send_grad(self) -> None:
        """Nothing to post."""
