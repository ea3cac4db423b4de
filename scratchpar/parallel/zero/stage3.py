"""ZeRO stage 3: the parameters are split too, gathered one layer at a time and freed after use."""

from __future__ import annotations

import weakref
from typing import NamedTuple

from ...autograd import Function, SavedArrays, Tensor, is_grad_enabled, recording
from ...comm import collectives
from ...comm.progress import Handle
from ...nn.unfilled import values
from ..pieces import Block
from .flat import FlatGroup
from .stage2 import ZeRO2


class Saved(NamedTuple):
    """Stands in an autograd context for parameter j of group k while the group is freed."""

    k: int
    j: int


class ZeRO3(ZeRO2):
    """P_os+g+p (Rajbhandari et al. 2020, §5.3): a rank keeps only its 1/N chunk of every
    parameter, 16Ψ/N bytes with Adam in float32, plus the layers gathered at the time.

    The units are the model's ``pipeline_layers()``, one flat group each. A parameter that
    several layers share, or none holds, joins a root group that stays gathered for the step
    (the tied embedding). For unit k, in forward: gather θ_k[n] from the chunks θ_k,ᵣ[n/N]
    (the next unit's gather is started behind it), compute, free. In backward, before the
    unit's first op: gather again (the previous unit's started behind it). When its last
    gradient is final: free, and reduce-scatter the gradient as stage 2 does.

    Between forward and backward the autograd graph holds no gathered parameter: its contexts
    keep a :class:`Saved` token in its place (:class:`~scratchpar.autograd.saved.
    SavedArrays`), and backward reads the array gathered again.

    It trains the model it is given in place, sharded: that is its point. From construction on,
    a unit's parameters hold data only while the unit runs (``strategy.model`` is the given
    model), until :meth:`gather_model` makes every parameter whole again for good. A model
    built under ``nn.deferred()`` is never whole on any rank: each draws its chunks alone
    (one parameter at a time), and the ranks check that they drew one model.
    """

    stage = 3
    draws_parts = True  # an unfilled model's chunks are drawn here, never the whole of it

    def _plan(self, bucket_bytes: int) -> list[FlatGroup]:
        layers = getattr(self.model, "pipeline_layers", lambda: [])()
        owners: dict[int, list[int]] = {}
        for i, layer in enumerate(layers):
            for p in layer.parameters():
                owners.setdefault(id(p), []).append(i)
        units = [[p for p in layer.parameters() if owners[id(p)] == [i]]
                 for i, layer in enumerate(layers)]
        root = [p for p in self.params if len(owners.get(id(p), [])) != 1]
        size, rank = self.comm.size, self.comm.rank
        groups, self.labels = [], []  # per group: "layer i", or "root"
        self.unit_group = {}  # id(layer) → its group, for the hooks
        for i in reversed(range(len(layers))):  # backward's order: the reductions start so
            if units[i]:
                self.unit_group[id(layers[i])] = len(groups)
                groups.append(FlatGroup(units[i], size, rank))
                self.labels.append(f"layer {i}")
        self.hooked = [layer for layer in layers if id(layer) in self.unit_group]
        self.root = len(groups) if root else None
        if root:
            groups.append(FlatGroup(root, size, rank))
            self.labels.append("root")
        after = self.probes.after(self._after)  # a layer freed: what the stage holds changes
        for layer in self.hooked:
            layer.set_forward_hooks(self._before, after)
        # a gather's finish, where what the stage holds changes
        self._finish_gather = self.probes.after(Handle.wait)
        self._gathered, self._gathering = {}, {}  # group → (buffer, since) / started handle
        self._bound = {}  # id(a parameter's gathered array) → Saved(group, index)
        self._freed = []  # weak references to buffers freed, where the array module allows
        self.gathers = self.frees = 0
        self.whole = False
        return groups

    def _store(self, group):
        """This rank's chunk of the group (n/N,), copied from each parameter's part of it,
        or drawn where the parameter is unfilled; then the parameters are freed."""
        chunk = self.xp.empty(group.mine.size, group.dtype)  # (n/N,)
        for i, start, stop, at in group.mine.pieces:
            p = group.params[i]
            chunk[at:at + stop - start] = values(p.data, Block.flat(p.shape, start, stop))
        for p in group.params:
            p.data = self.xp.empty(0, p.dtype)  # freed: only the chunk remains
        return chunk

    def _chunk(self, k: int):
        return self.flats[k]

    def _parameters(self) -> list:
        self.update.flush()
        return self._whole(self.flats)

    def _refresh(self) -> None:
        """Nothing: the parameters stay in chunks, and each forward gathers them."""

    # -- gather and free ------------------------------------------------------------------------
    def _start_gather(self, k: int) -> None:
        if k in self._gathered or k in self._gathering:
            return
        group = self.groups[k]
        self.update.upload(k)  # offload: this layer's new chunk, behind the layer computing
        whole = self.xp.empty(group.n, group.dtype)  # (n,)
        group.owned(whole)[...] = self.flats[k]
        self._gathering[k] = collectives.all_gather_start(self.comm, whole)

    def _gather(self, k: int) -> None:
        """Group k whole, and its parameters bound to it."""
        if k in self._gathered:
            return
        self._start_gather(k)
        whole = self._finish_gather(self._gathering[k])  # (n,)
        del self._gathering[k]
        group = self.groups[k]
        group.bind(whole)
        for j, p in enumerate(group.params):
            self._bound[id(p.data)] = Saved(k, j)
        self._gathered[k] = (whole, self.tracer.now() if self.tracer.enabled else 0)
        self.gathers += 1

    def _free(self, k: int) -> None:
        whole, since = self._gathered.pop(k)
        for p in self.groups[k].params:
            del self._bound[id(p.data)]
            p.data = self.xp.empty(0, p.dtype)
        if self.tracer.enabled:
            self.tracer.record(f"{self.labels[k]} gathered", "memory", since,
                               self.tracer.now(), whole.nbytes)
        try:
            self._freed.append(weakref.ref(whole))
        except TypeError:  # an array type without weak references
            pass
        self.frees += 1

    def resident(self) -> int:
        """Gathered buffers still alive: held by the strategy, or by anything else."""
        return len(self._gathered) + sum(ref() is not None for ref in self._freed)

    # -- the hooks ------------------------------------------------------------------------------
    def _before(self, layer) -> None:
        k = self.unit_group[id(layer)]
        self._gather(k)
        if k > 0:  # the groups hold the layers last first: group k − 1 runs next
            self._start_gather(k - 1)  # prefetch it

    def _after(self, layer, out):
        k = self.unit_group[id(layer)]
        self._free(k)
        self._poll()
        if is_grad_enabled() and isinstance(out, Tensor) and out.requires_grad:
            return BeforeBackward.apply(out, self, k)
        return out

    def _before_backward(self, k: int) -> None:
        self._gather(k)
        if k + 1 < len(self.hooked):  # group k + 1 holds the layer backward reaches next
            self._start_gather(k + 1)  # prefetch it

    def _poll(self) -> None:
        """Advance the gathers in flight: a ring's steps move only when someone polls them."""
        for handle in self._gathering.values():
            handle.test()

    def _grad_ready(self, leaf) -> None:
        super()._grad_ready(leaf)
        self._poll()

    def _complete(self, k: int) -> None:
        if k in self._gathered:
            self._free(k)

    def _pack(self, value):
        return self._bound.get(id(value), value)

    def _unpack(self, value):
        if type(value) is not Saved:
            return value
        if value.k not in self._gathered:
            raise RuntimeError(f"ZeRO-3: group {value.k}'s parameters were needed in backward "
                               "before they were gathered")
        return self.groups[value.k].params[value.j].data

    # -- the step -------------------------------------------------------------------------------
    def _forward(self, global_batch):
        if self.whole:
            raise RuntimeError("ZeRO-3 does not train after gather_model(): the model is whole")
        self._freed = []
        if self.root is not None:
            self._gather(self.root)
        with recording(SavedArrays(self._pack, self._unpack)):
            return super()._forward(global_batch)

    def _backward(self, local) -> None:
        super()._backward(local)
        if self.root is not None and self.root in self._gathered:
            self._free(self.root)  # backward reached none of its parameters

    def score(self, batch, task) -> tuple[float, float]:
        """Scored as a step's forward runs: each layer gathered as it starts and freed as it
        ends, the parameters of no layer (the root group) for the whole forward."""
        self._freed = []
        if self.root is not None:
            self._gather(self.root)
        try:
            return super().score(batch, task)
        finally:
            if self.root is not None and self.root in self._gathered:
                self._free(self.root)

    def gather_model(self) -> None:
        """Every parameter whole in the model, for the held-out evaluation (a collective).
        The layers' hooks are removed, and the strategy trains no more."""
        for k in range(len(self.groups)):
            self._gather(k)
        for layer in self.hooked:
            layer.set_forward_hooks(None, None)
        self._gathered, self._bound, self.whole = {}, {}, True

    def _held(self) -> dict[str, list]:
        held = super()._held()
        gathered = [w for w, _ in self._gathered.values()]
        gathering = [h.result for h in self._gathering.values()]
        return {**held, "gathered": gathered + gathering}


class BeforeBackward(Function):
    """Identity in forward; in backward, unit k is gathered before any of its ops runs."""

    @staticmethod
    def forward(ctx, x, owner, k):
        ctx.owner, ctx.k = owner, k
        return x

    @staticmethod
    def backward(ctx, g):
        ctx.owner._before_backward(ctx.k)
        return g, None, None
