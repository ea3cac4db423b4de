"""Differentiable communication in dual pairs: each operation's backward is its partner.

    identity   ↔ all-reduce       Megatron's f and g (Shoeybi et al. 2019, §3, Fig. 3)
    all-gather ↔ reduce-scatter   along any axis (Korthikanti et al. 2022, §4.2: g and ḡ)
    all-to-all ↔ all-to-all       split one axis, join another; backward swaps the two
    all-to-all-v ↔ all-to-all-v   rows to each rank; backward sends them back (expert dispatch)
    gather     ↔ split            an output gathered for a loss every rank computes alike
    send       ↔ recv             between pipeline stages (Huang et al. 2019, GPipe, §2.2)

Each function takes a Tensor and the communicator and returns a Tensor. Every rank of the
communicator calls it in the same order, and later runs the matching backward in the same order.
The convention is Megatron's. A tensor that every rank uses whole (f's input, all-gather's
result) gets a share of its gradient from each rank's part of the work, and the backward sums
the shares (all-reduce, reduce-scatter). A sum over ranks (g, reduce-scatter) hands each rank
its result exactly, so the gradient goes back as it came (identity, all-gather). After g the
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
from .links import Blocking, Outgoing


def identity(x, comm) -> Tensor:
    """Megatron's f: ``x`` unchanged forward; backward all-reduces (sums) the gradient."""
    return Identity.apply(x, comm=comm)


def all_reduce(x, comm) -> Tensor:
    """Megatron's g: Σ over ranks of ``x`` forward; backward passes the gradient unchanged."""
    return AllReduce.apply(x, comm=comm)


def all_gather(x, comm, axis: int = 0, rows: list[int] | None = None) -> Tensor:
    """Every rank's ``x`` joined along ``axis`` in rank order; backward reduce-scatters.

    Rank i holds ``chunks.counts(N, p)[i]`` of the N joined rows (any N, equal shares or not):
    ``rows``, where every rank's caller knows them alike, else exchanged first.
    """
    return AllGather.apply(x, comm=comm, axis=axis, rows=rows)


def gather(x, comm, axis: int = -1) -> Tensor:
    """Every rank's ``x`` joined along ``axis``, for a loss every rank computes alike (counted
    once). Backward keeps this rank's slice of the gradient (Megatron's gather ↔ split)."""
    return Gather.apply(x, comm=comm, axis=axis)


def reduce_scatter(x, comm, axis: int = 0) -> Tensor:
    """This rank's ``chunks.bounds(N, p)[rank]`` rows along ``axis`` of Σ over ranks of ``x``;
    backward all-gathers."""
    return ReduceScatter.apply(x, comm=comm, axis=axis)


def all_to_all(x, comm, split: int, join: int) -> Tensor:
    """``x`` cut into p equal parts along ``split``, part j to rank j, and the parts received
    joined along ``join`` in rank order; backward is the same exchange with the axes swapped
    (DeepSpeed-Ulysses' sequence ↔ head exchange, Jacobs et al. 2023, §3.1)."""
    return AllToAll.apply(x, comm=comm, split=split, join=join)


def all_to_all_v(x, comm, sent: list[int], received: list[int]) -> Tensor:
    """``sent[j]`` rows of ``x`` to rank j, in order, and the ``received[i]`` rows from each
    rank i joined in rank order; backward sends each row's gradient back where it came from
    (an expert layer's dispatch and combine, Lepikhin et al. 2020, GShard §2.2). Every rank's
    caller knows both counts: the dispatch exchanged them first."""
    return AllToAllV.apply(x, comm=comm, sent=list(sent), received=list(received))


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
    """Receive a ``shape`` ``dtype`` tensor from rank ``source``. Its backward sends the gradient
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
    return Recv.apply(_anchor(), shape=tuple(shape), dtype=dtype, link=link)


_ANCHORS: dict = {}  # array module → its anchor


def _anchor() -> Tensor:
    """A leaf that requires a gradient and never gets one (Recv's backward gives it None): it
    gives a received tensor a backward. One serves every receive."""
    xp = xp_default()
    if xp not in _ANCHORS:
        _ANCHORS[xp] = Tensor(xp.zeros(()), requires_grad=True)
    return _ANCHORS[xp]


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
    def forward(ctx, x, comm, axis, rows=None):
        ctx.comm, ctx.axis = comm, axis
        if rows is None:
            rows = [int(r) for r in comm.allgather_obj(x.shape[axis])]
        elif rows[comm.rank] != x.shape[axis]:
            raise CommError(f"all_gather along axis {axis}: this rank holds {x.shape[axis]} "
                            f"rows, not the {rows[comm.rank]} its caller said")
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


class AllToAll(Function):
    """y = the parts every rank sent here, joined: ∂L/∂x is ∂L/∂y's parts sent back."""

    @staticmethod
    def forward(ctx, x, comm, split, join):
        ctx.comm, ctx.split, ctx.join = comm, split, join
        return _exchanged(comm, x, split, join)

    @staticmethod
    def backward(ctx, g):
        return _exchanged(ctx.comm, g, ctx.join, ctx.split)


class AllToAllV(Function):
    """y = the rows every rank sent here: ∂L/∂x is ∂L/∂y's rows sent back, counts swapped."""

    @staticmethod
    def forward(ctx, x, comm, sent, received):
        ctx.comm, ctx.sent, ctx.received = comm, sent, received
        return collectives.all_to_all_v(comm, x, sent, received=received)[0]

    @staticmethod
    def backward(ctx, g):
        return collectives.all_to_all_v(ctx.comm, g, ctx.received, received=ctx.sent)[0]


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


def _summed(comm, a):
    """A new C-ordered array: Σ over ranks of ``a``."""
    return collectives.all_reduce_(comm, get_array_module(a).array(a, order="C"))


def _exchanged(comm, a, split: int, join: int):
    """``a``'s p parts along ``split`` exchanged (part j to rank j), joined along ``join``."""
    xp, p = get_array_module(a), comm.size
    if a.shape[split] % p:
        raise CommError(f"all_to_all along axis {split}: {a.shape[split]} do not split into "
                        f"{p} equal parts")
    parts = xp.ascontiguousarray(xp.stack(xp.split(a, p, axis=split)))  # (p, …): one a rank
    received = collectives.all_to_all(comm, parts)  # (p, …): part i from rank i
    return xp.ascontiguousarray(xp.concatenate(list(received), axis=join))


def _along(axis: int, a, collective):
    """Run ``collective``, which splits or joins along axis 0, along ``axis`` instead."""
    xp = get_array_module(a)
    front = xp.ascontiguousarray(xp.moveaxis(a, axis, 0))  # the axis first
    return xp.ascontiguousarray(xp.moveaxis(collective(front), 0, axis))
