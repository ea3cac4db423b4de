"""One runtime for every schedule: a rank runs its list of actions over the pipeline's
communicator, one micro-batch activation or gradient per message."""

from __future__ import annotations

from ...autograd import Tensor, Weights, no_grad
from ...trace.tracer import NULL
from .. import duals
from ..links import HandOff, Held, Incoming, Outgoing
from .actions import SENDS, Action, virtual_stage
from .lower import receive_for, send_for
from .shapes import agree_shapes


class StageFailed(RuntimeError):
    """An exception inside one action, re-raised naming the stage and the action."""


class Runtime:
    """Runs this rank's actions of a schedule (DESIGN.md, "Pipeline schedules are data").

    ``F`` runs a chunk on the micro-batch's inputs (virtual stage 0) or on the activation
    received for it, and on the last virtual stage scores the output against the targets with
    ``loss_fn(out, targets, "sum")``: summed losses, so that gradients accumulated over the
    micro-batches are those of the whole batch's summed loss. ``B`` backpropagates from the
    loss, or from the stand-in of the chunk's sent output, whose backward takes in the
    gradient from downstream. Where the schedule has ``W`` actions (zero bubble), B computes
    the activations' gradients alone, and W the chunk's weights' (``autograd/weights.py``).

    The messages are the send ↔ recv duals, non-blocking (``duals.isend``, ``duals.irecv``):
    an activation's send and its gradient's receive are one link, as are an activation's
    receive and its gradient's send. Sends go as soon as their compute ends (a gradient's from
    inside B, once backward reaches the chunk's input): the rank computes on while a message
    travels, and :meth:`settle` waits for them. Each receive is posted where the schedule has
    it and waited for only by the compute that needs its message (:meth:`_exchange`). Each
    activation's shape is agreed once per batch shape (:func:`~.shapes.agree_shapes`), never
    per message. ``STEP`` calls ``on_step(mb)``.

    While a step runs, ``held`` tracks the micro-batches forwarded and not yet backwarded and
    the bytes of their boundary activations. ``peak`` and ``peak_bytes`` keep the maxima.
    """

    def __init__(self, stage, comm, loss_fn, tracer=NULL, sync_sends: bool = False):
        self.stage, self.comm, self.loss_fn, self.tracer = stage, comm, loss_fn, tracer
        self.p, self.v = comm.size, stage.v
        self.last = self.p * self.v - 1
        self.sync_sends = sync_sends  # wait for each send at once: rendezvous, as in the simulator
        self.rows: dict = {}  # per batch shape: the row shape entering each virtual stage
        self.peak = self.peak_bytes = 0
        self._compiled = None  # (actions, their program): see _program
        self.handlers = {"F": self._f, "B": self._b, "W": self._w, "STEP": self._step,
                         "SEND_ACT": self._send_act, "SEND_GRAD": self._send_grad,
                         "RECV_ACT": self._recv_act, "RECV_GRAD": self._recv_grad}

    def run(self, actions: list[Action], micro: list[tuple], on_step) -> list:
        """Run ``actions`` on micro-batches ``micro`` [(inputs, targets), …]. Returns the summed
        loss Tensor of each micro-batch that this rank's last virtual stage scored."""
        self.micro, self.on_step = micro, on_step
        self.inputs, self.outputs, self.sends, self.losses = {}, {}, [], {}
        self.sent, self.received = {}, {}  # (mb, chunk) → the link of its output, its input
        self.held, self.handed, self.posted = {}, {}, {}  # posted: receive → its request
        self.split = any(a.kind == "W" for a in actions)  # B's weight gradients wait for W
        self.weights = {}  # (mb, chunk) → what its W computes
        self.row_shapes = self._agreed(micro[0][0])
        self.peak = self.peak_bytes = 0
        for block, compute in self._program(actions):
            self._exchange(block)
            if compute is None:
                break
            action, name, receive, waiting, early, sending = compute
            self._wait_for(receive, waiting)
            with self.tracer.region(name, "compute"):
                self._run_one(action)
            if early is not None:  # its output goes at once
                with self.tracer.region(sending, "comm"):
                    self._run_one(early)
        self.settle()
        return list(self.losses.values())

    def _program(self, actions: list[Action]) -> list:
        """``actions`` as the loop of :meth:`run` walks them, worked out once per list: each
        compute with the messages before it (``(action, region name)``, the sends left out
        where they go early), the receive it waits for and the send it starts at once, with
        their region names. A step then spends no time on what the schedule already says."""
        if self._compiled is not None and self._compiled[0] is actions:
            return self._compiled[1]
        rank, planned = self.comm.rank, {a for a in actions if a.kind in SENDS}
        program, block = [], []
        for action in actions:
            if action.is_comm:
                if self.sync_sends or action.kind not in SENDS:
                    block.append((action, str(action)))
                continue
            receive = receive_for(rank, action, self.p, self.v)
            early = send_for(rank, action, self.p, self.v)
            early = None if self.sync_sends or early not in planned else early
            program.append((block, (action, str(action), receive, f"wait {receive}", early,
                                    early and str(early))))
            block = []
        program.append((block, None))
        self._compiled = actions, program  # holding the list: its id is never reused
        return program

    def _exchange(self, block: list[tuple[Action, str]]) -> None:
        """The messages between two computes, with their region names. The sends already went,
        each as soon as the compute that produced it ended (:meth:`_program` leaves them out).
        The receives are posted here, and each is waited for only by the compute that needs it
        (:meth:`_wait_for`). Non-blocking messages never block, so starting them earlier than
        the schedule wrote them (where the order is safe for synchronous sends, see lower.py)
        only brings them sooner. The simulator times schedules this way
        (``simulator.execute_eager``). With ``sync_sends`` the block runs in the schedule's
        order, each message complete before the next: the rendezvous semantics that
        ``simulator.check`` holds every schedule to."""
        for a, name in block:
            with self.tracer.region(name, "comm"):
                self._run_one(a)
            if self.sync_sends:
                self._wait_for(a, f"wait {a}")

    def _wait_for(self, receive: Action | None, name: str) -> None:
        """Wait until the message of ``receive`` (posted earlier) is in, if it is pending; the
        wait is region ``name``."""
        pending = self.posted.pop(receive, None)
        if pending is None:
            return
        with self.tracer.region(name, "comm"):
            try:
                self.comm.wait(pending)
            except Exception as error:
                raise StageFailed(f"pipeline stage {self.comm.rank} of {self.p} failed waiting "
                                  f"for {receive}: {type(error).__name__}: {error}") from error

    def settle(self) -> None:
        """Wait for every send in flight (their buffers may then be reused)."""
        self.comm.wait_all([request for request, _ in self.sends])  # links keep the buffers
        self.sends = []

    def _run_one(self, action: Action) -> None:
        try:
            self.handlers[action.kind](action)
        except StageFailed:
            raise
        except Exception as error:
            raise StageFailed(f"pipeline stage {self.comm.rank} of {self.p} failed in action "
                              f"{action}: {type(error).__name__}: {error}") from error

    # -- compute --------------------------------------------------------------------------------
    def _f(self, a: Action) -> None:
        k = self._k(a)
        x = self.micro[a.mb][0] if k == 0 else self.inputs.pop((a.mb, a.chunk))
        out = self.forward(a, x)
        if k == self.last:
            out = self.loss_fn(out, self.micro[a.mb][1], reduction="sum")
            self.losses[a.mb] = out.detach()  # its value: the graph goes with its backward
        self.outputs[a.mb, a.chunk] = out
        self.held[a.mb, a.chunk] = _nbytes(x) + out.data.nbytes
        self.peak = max(self.peak, len(self.held))
        self.peak_bytes = max(self.peak_bytes, sum(self.held.values()))

    def forward(self, a: Action, x):
        """This chunk's layers on ``x`` (PipeDream's runtime runs them on stashed weights)."""
        return self.stage.chunks[a.chunk](x)

    def _b(self, a: Action) -> None:
        weights = Weights(self.stage.chunks[a.chunk].parameters()) if self.split else None
        self.backward(a, self.outputs.pop((a.mb, a.chunk)), weights)
        if weights is not None:
            self.weights[a.mb, a.chunk] = weights
        del self.held[a.mb, a.chunk]

    def backward(self, a: Action, root, weights: Weights | None = None) -> None:
        """Backpropagate from ``root``: the loss, or the stand-in of the sent activation.
        With ``weights`` (the chunk's), their gradients wait for ``W``, which runs them."""
        root.backward(hooks=weights)

    def _w(self, a: Action) -> None:
        self.weights.pop((a.mb, a.chunk)).run()

    def _step(self, a: Action) -> None:
        self.settle()
        self.on_step(a.mb)

    # -- messages -------------------------------------------------------------------------------
    def _send_act(self, a: Action) -> None:
        key = a.mb, a.chunk
        if a.peer == self.comm.rank:  # one rank, consecutive chunks: a hand-off, no message
            link = self.handed[a.mb, self._boundary(a)] = HandOff()
        else:
            link = Outgoing(self.comm, a.peer, self._tag(a))
        self.outputs[key] = duals.isend(self.outputs[key], link)  # the stand-in, for B
        self.sent[key] = link
        self._in_flight(link.request, link)

    def _recv_act(self, a: Action) -> None:
        rows = len(self.micro[a.mb][0])
        shape, dtype = self.row_shapes[self._k(a)]
        if a.peer == self.comm.rank:
            link = self.handed.pop((a.mb, self._boundary(a)))
        else:  # with sync_sends the gradient goes where the schedule has SEND_GRAD, not in B
            end = Held if self.sync_sends else Incoming
            link = end(self.comm, a.peer, self._tag(a))
        self.inputs[a.mb, a.chunk] = duals.irecv((rows, *shape), dtype, link)  # filled by the wait
        self.received[a.mb, a.chunk] = link
        if link.request is not None:
            self.posted[a] = link.request

    def _recv_grad(self, a: Action) -> None:
        request = self.sent.pop((a.mb, a.chunk)).expect()  # B's stand-in waits for it
        if request is not None:
            self.posted[a] = request

    def _send_grad(self, a: Action) -> None:
        link = self.received.pop((a.mb, a.chunk))
        self._in_flight(link.send_grad(), link)  # posted by B's backward, unless held

    def _in_flight(self, request, link) -> None:
        """Keep a send's ``request`` (and its ``link``, which holds the buffer) until settled."""
        if request is None:
            return
        self.sends.append((request, link))
        if self.sync_sends:
            self.settle()

    def _tag(self, a: Action) -> int:
        """The same on both ends and for both directions of one link: the micro-batch and the
        boundary it crosses, folded into the communicator's tags."""
        return self.comm.tag(a.mb * self.last + self._boundary(a))

    def _boundary(self, a: Action) -> int:
        """The lower virtual stage of the boundary that the message of ``a`` crosses."""
        return self._k(a) - (a.kind in ("SEND_GRAD", "RECV_ACT"))  # those cross k − 1 → k

    def _k(self, a: Action) -> int:
        return virtual_stage(self.comm.rank, a.chunk, self.p)

    def _agreed(self, inputs):
        key = (tuple(inputs.shape[1:]), str(inputs.dtype))
        if key not in self.rows:
            with no_grad():
                self.rows[key] = agree_shapes(self.stage.chunks, self.comm, inputs[:0])
        return self.rows[key]


def _nbytes(x) -> int:
    return (x.data if isinstance(x, Tensor) else x).nbytes
