"""A parameter server's ranks and roles: servers 0 … S−1 own key ranges on the host, the rest
work. Every variant, the synchronous spec included, starts from this part."""

from __future__ import annotations

from ...autograd.precision import wide, widened
from ...backend import to_host
from ...comm.chunks import bounds
from ...data.shard import Part
from ...nn.module import Parameter
from ...optim.mixed import rule_and_scaler
from ..description import Description, Message
from ..strategy import Strategy, whole_model
from .protocol import Header
from .ranges import KeyRanges
from .state import ServerState


class Roles(ServerState, Strategy):
    """Splits the mesh's world (pure data parallelism, ``Mesh(comm)``) into ``servers`` S
    servers, ranks 0 … S−1, and W workers. A server holds its range of the flat parameters on
    the host (``flat``, a CPU master whatever device the workers compute on) and steps it with
    :attr:`optimizer`, ``make_optimizer([flat])``'s rule: the range is the master, so a
    mixed-precision wrapper's rule steps it alone, in fp32. A worker's optimizer,
    ``make_optimizer(model.parameters())``, only carries the learning rate the training loop
    sets; it never steps. The protocol runs on its
    own dup of the world (``comm``), and the servers (or workers) have a communicator of their
    own (``group``). Every rank keeps the caller's model whole: a worker's holds the
    parameters it pulled last, a server's those it started from (:meth:`gather_model` fills
    rank 0's).

    A model in 16 bits trains in mixed precision with the server's range as the fp32 master
    (Micikevicius et al. 2018, §3.1): workers push their gradients in fp32, divided by S, the
    scale of the loss scaler ``make_optimizer``'s wrapper holds (the one their loss carries;
    fp16), and pull fp32 ranges that their 16-bit model rounds. Each rank's scaler answers the
    verdicts it sees (:meth:`_judged`)."""

    def __init__(self, model, make_optimizer, objective, mesh, /, *, servers: int = 1,
                 grad_clip: float = 0.0):
        super().__init__(model, None, objective, mesh, grad_clip=grad_clip)
        world = whole_model(mesh, type(self).__name__)
        if not 1 <= servers < world.size:
            raise ValueError(f"a parameter server needs 1 ≤ servers < ranks: {servers} servers "
                             f"on {world.size} ranks leave no worker")
        self.comm = world.dup(name="ps")  # its own: its tags never meet another subsystem's
        self.servers, self.workers = servers, world.size - servers
        self.ranges = KeyRanges([p.size for p in self.params], servers)
        self.is_server = world.rank < servers
        self.wire = widened(self.params[0].dtype)  # what moves: fp32
        self.group = world.split(0 if self.is_server else 1, name="ps servers" if self.is_server
                                 else "ps workers")
        if self.is_server:
            host = [to_host(p.data) for p in self.params]
            self.flat = Parameter(self.ranges.gather(host, world.rank).astype(self.wire))  # (K_s,)
            self._optimizer, self.scaler = rule_and_scaler(make_optimizer([self.flat]))
        else:
            self._optimizer = make_optimizer(self.params)  # the loop sets its lr; never steps
            self.scaler = rule_and_scaler(self._optimizer)[1]

    def rows(self, batch_size: int) -> tuple[int, int]:
        """Worker w's share of the global batch, ``bounds(B, W)[w]`` (what :func:`shard` cuts
        for it); a server reads no row: ``(0, 0)``."""
        if self.is_server:
            return 0, 0
        return bounds(batch_size, self.workers)[self.comm.rank - self.servers]

    @classmethod
    def describe(cls, shape, world: int, servers: int = 1, n_push: int = 1,
                 n_fetch: int = 1, server: int = 0) -> Description:
        """The busier of a worker and a server. A worker holds the model and its gradient,
        the ranges it pushes and pulls, and the gradient not yet pushed. A server holds the
        model too (every rank builds it) and, on the host, its range of K_s = ⌈Ψ/S⌉ keys,
        their optimizer state, the combined gradient and up to one push per worker (a clock's,
        held to be applied as one). The busiest server receives each worker's push every
        ``n_push`` steps and answers a pull every ``n_fetch`` (Li et al. 2014, §3; Dean et al.
        2012, §4.1), with a header per step: 2·W·s·K_s bytes a step against a ring
        all-reduce's 2(p − 1)/p·sΨ per rank. The messages are ``server``'s (server 0's range,
        the first, is one of the longest)."""
        p, w = shape.bytes, world - servers
        start, stop = bounds(shape.psi, servers)[server]
        wire = shape.widened().itemsize  # a range's bytes an element: fp32 masters
        ks = wire * (stop - start)  # the server's range, in bytes
        worker = {"parameters": p, "gradients": p, "optimizer": 0,
                  "buffers": 3 * wire * shape.psi}  # pushed, pulled, not yet pushed
        host = {"parameters": ks, "gradients": ks,
                "optimizer": (shape.k - shape.master) * (stop - start),  # its range is the master
                "buffers": w * ks}
        server = {**host, "parameters": p + ks}
        header = Header.buffer().nbytes
        sends = (Message("push", "workers", ks, w / n_push),
                 Message("pull", "workers", ks, w / n_fetch),
                 Message("header", "workers", header, w),
                 Message("all-reduce", "servers", 8, 1))  # the squared norm of every range
        if sum(server.values()) > sum(worker.values()):
            return Description(server, sends, on_host=sum(host.values()), chunk=ks,
                               arrays=shape.per_array)  # its range, one flat array
        return Description(worker, sends, chunk=shape.largest)

    def _mean_gradient(self, batch):
        """A worker's mean gradient ∇L_w on its rows ``batch``, in each ``p.grad``; returns L_w
        (an array: no wait for the device here)."""
        for p in self.params:
            p.grad = None
        loss, _, scale = self.backward_mean(batch)
        return loss * scale

    @staticmethod
    def _reported(metrics: dict, batch) -> dict:
        """A step's ``metrics`` with its ``"units"`` kept only where the loop handed this rank
        its rows alone (a :class:`~scratchpar.data.shard.Part`) and so could not count them."""
        units = metrics.pop("units")
        if isinstance(batch, Part):
            metrics["units"] = units
        return metrics

    def _pushed(self, grads: list) -> list:
        """A worker's gradients as a server takes them: in fp32 from 16 bits, S·∇ / S."""
        if self.params[0].dtype == self.wire:
            return grads
        scale = 1.0 if self.scaler is None else self.scaler.scale
        return [wide(g) * (1.0 / scale) for g in grads]

    def _judged(self, metrics: dict) -> dict:
        """``metrics`` of a step, with the loss scale's answer to its verdict: a skipped step
        halves it (an overflow, unless at its floor: then divergence), an applied one counts
        towards its growth. Every rank that sees the same verdicts holds the same scale."""
        if self.scaler is None:
            return metrics
        if not metrics["skipped"]:
            self.scaler.applied()
        elif self.scaler.overflowed():
            metrics["overflow"] = True
        return metrics

    def close(self) -> None:
        """Collective: free the communicators this strategy made."""
        self.comm.free()
        self.group.free()
