"""Differentiable communication in dual pairs: each operation's backward is its partner.

    identity   ↔ all-reduce       Megatron's f and g (Shoeybi et al. 2019, §3, Fig. 3)
    all-gather ↔ reduce-scatter   along any axis (Korthikanti et al. 2022, §4.2: g and ḡ)
    gather     ↔ split            an output gathered for a loss every rank computes alike
    send       ↔ recv             between pipeline stages (Huang et al. 2019, GPipe, §2.2)

Each function takes a Tensor and the communicator and returns a Tensor; every rank of the
communicator calls it in the same order, and later runs the matching backward in the same order.
The convention is Megatron's. A tensor that every rank uses whole (f's input, all-gather's
result) gets a share of its gradient from each rank's part of the work, and the backward sums
the shares (all-reduce, reduce-scatter). A sum over ranks (g, reduce-scatter) hands each rank
its result exactly, so the gradient goes back as it came (identity, all-gather); after g the
loss is computed alike on every rank and counted once.

Send and recv also come non-blocking, for pipelines: :func:`isend` and :func:`irecv` post their
messages on a link (one per tensor crossing, both directions) whose requests the caller waits
for when it needs them. A link between two chunks of one rank hands the tensor over instead.
"""

from __future__ import annotations

from ..autograd import Function, Tensor
from ..backend import get_array_module, xp_default
from ..comm import collectives
from ..comm.chunks import counts
from ..comm.errors import CommError


def identity(x, comm) -> Tensor:
    """Megatron's f: ``x`` unchanged forward; backward all-reduces (sums) the gradient."""
    return Identity.apply(x, comm=comm)


def all_reduce(x, comm) -> Tensor:
    """Megatron's g: Σ over ranks of ``x`` forward; backward passes the gradient unchanged."""
    return AllReduce.apply(x, comm=comm)


def all_gather(x, comm, axis: int = 0) -> Tensor:
    """Every rank's ``x`` joined along ``axis`` in rank order; backward reduce-scatters.

    Rank i holds ``chunks.counts(N, p)[i]`` of the N joined rows (any N, equal shares or not).
    """
    return AllGather.apply(x, comm=comm, axis=axis)


def gather(x, comm, axis: int = -1) -> Tensor:
    """Every rank's ``x`` joined along ``axis``, for a loss every rank computes alike (counted
    once); backward keeps this rank's slice of the gradient (Megatron's gather ↔ split)."""
    return Gather.apply(x, comm=comm, axis=axis)


def reduce_scatter(x, comm, axis: int = 0) -> Tensor:
    """This rank's ``chunks.bounds(N, p)[rank]`` rows along ``axis`` of Σ over ranks of ``x``;
    backward all-gathers."""
    return ReduceScatter.apply(x, comm=comm, axis=axis)


def send(x, comm, dest: int, tag: int = 0) -> Tensor:
    """Send ``x`` to rank ``dest``; returns a stand-in for the loss that ``dest`` will compute.

    The stand-in is a scalar 0 whose gradient with respect to ``x`` is the one ``dest`` sends
    back: ``token.backward()`` (or ``(local_loss + token).backward()``) receives it and carries
    on through this rank's graph. ``x`` must require grad whenever ``dest`` runs a backward.
    ``tag`` is in ``0..comm.tag_ub`` (``comm.tag(n)`` folds any number into it).
    """
    link = Outgoing(comm, dest, tag)
    token = isend(x, link)
    link.wait()
    return token


def recv(shape, dtype, comm, source: int, tag: int = 0) -> Tensor:
    """Receive a ``shape`` ``dtype`` tensor from rank ``source``; its backward sends the gradient
    back to ``source`` (so the received tensor must reach the loss)."""
    link = Blocking(comm, source, tag)
    x = irecv(shape, dtype, link)
    link.wait()
    return x


def isend(x, link) -> Tensor:
    """:func:`send` without waiting: ``x`` goes over ``link`` (an :class:`Outgoing`, or a
    :class:`HandOff`) at once, and is on its way until ``link.wait()``. The stand-in's backward
    waits for the gradient's receive: ``link.expect()`` posts it ahead, else backward does."""
    return Send.apply(x, link=link)


def irecv(shape, dtype, link) -> Tensor:
    """:func:`recv` without waiting: the receive is posted on ``link`` (an :class:`Incoming`,
    or the :class:`HandOff` its sender used), and the tensor's data is in once ``link.wait()``
    returns. Its backward gives the gradient to ``link``, which sends it back to the sender
    (:meth:`Incoming.send_grad` is the message's request)."""
    anchor = Tensor(xp_default().zeros(()), requires_grad=True)  # gives the result a backward
    return Recv.apply(anchor, shape=tuple(shape), dtype=dtype, link=link)


class Identity(Function):
    """f: every rank's shard of the layer uses the same x, so ∂L/∂x = Σ_r ∂L_r/∂x."""

    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return x

    @staticmethod
    def backward(ctx, g):
        return _summed(ctx.comm, g)  # Shoeybi et al. 2019, §3: f's backward is an all-reduce


class AllReduce(Function):
    """g: the summed output is replicated, and each rank's copy carries the whole gradient."""

    @staticmethod
    def forward(ctx, x, comm):
        return _summed(comm, x)  # Shoeybi et al. 2019, §3: g's forward is an all-reduce

    @staticmethod
    def backward(ctx, g):
        return g


class AllGather(Function):
    """y = [x_0; …; x_{p−1}] along ``axis``: ∂L/∂x_i = rows i of Σ_r ∂L_r/∂y, a reduce-scatter."""

    @staticmethod
    def forward(ctx, x, comm, axis):
        ctx.comm, ctx.axis = comm, axis
        rows = [int(r) for r in comm.allgather_obj(x.shape[axis])]
        if rows != counts(sum(rows), comm.size):
            raise CommError(f"all_gather along axis {axis}: the ranks hold {rows} rows, but its "
                            f"backward (a reduce-scatter) splits {sum(rows)} rows as "
                            f"{counts(sum(rows), comm.size)} (chunks.counts)")
        return _along(axis, x, lambda front: collectives.all_gather(comm, front, rows=rows))

    @staticmethod
    def backward(ctx, g):
        return _along(ctx.axis, g, lambda front: collectives.reduce_scatter(ctx.comm, front))


class Gather(AllGather):
    """y = [x_0; …; x_{p−1}] whose consumers run alike on every rank: ∂L/∂x_i is rows i of
    ∂L/∂y, the same on every rank, so no sum (Shoeybi et al. 2019, §3: the output gather of a
    column-parallel layer)."""

    @staticmethod
    def backward(ctx, g):
        xp = get_array_module(g)
        rows = counts(g.shape[ctx.axis], ctx.comm.size)
        start = sum(rows[:ctx.comm.rank])
        index = [slice(None)] * g.ndim
        index[ctx.axis] = slice(start, start + rows[ctx.comm.rank])
        return xp.ascontiguousarray(g[tuple(index)])


class ReduceScatter(Function):
    """y_i = rows i of Σ_r x_r along ``axis``: ∂L/∂x_r = [∂L/∂y_0; …; ∂L/∂y_{p−1}], all-gathered."""

    @staticmethod
    def forward(ctx, x, comm, axis):
        ctx.comm, ctx.axis = comm, axis
        ctx.rows = counts(x.shape[axis], comm.size)
        return _along(axis, x, lambda front: collectives.reduce_scatter(comm, front))

    @staticmethod
    def backward(ctx, g):
        return _along(ctx.axis, g, lambda front: collectives.all_gather(
            ctx.comm, front, rows=ctx.rows))


class Send(Function):
    """Forward sends the activation on; backward receives its gradient from the next stage."""

    @staticmethod
    def forward(ctx, x, link):
        link.send(x)
        ctx.link = link
        return get_array_module(x).zeros((), x.dtype)  # the stand-in for the loss downstream

    @staticmethod
    def backward(ctx, g):
        grad = ctx.link.gradient()  # ∂L/∂x, computed on the receiving rank
        grad *= g  # the stand-in may have been scaled or added to before backward
        return grad


class Recv(Function):
    """Forward receives the activation; backward sends its gradient to the previous stage."""

    @staticmethod
    def forward(ctx, anchor, shape, dtype, link):
        ctx.link = link
        return link.receive(shape, dtype)

    @staticmethod
    def backward(ctx, g):
        ctx.link.give(g)
        return None  # the anchor gets no gradient


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


def _summed(comm, a):
    """A new C-ordered array: Σ over ranks of ``a``."""
    return collectives.all_reduce_(comm, get_array_module(a).array(a, order="C"))


def _along(axis: int, a, collective):
    """Run ``collective``, which splits or joins along axis 0, along ``axis`` instead."""
    xp = get_array_module(a)
    front = xp.ascontiguousarray(xp.moveaxis(a, axis, 0))  # the axis first
    return xp.ascontiguousarray(xp.moveaxis(collective(front), 0, axis))
