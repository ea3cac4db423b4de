"""The collectives: one function each, over a Communicator, choosing a hand-written algorithm.

Arrays of any shape; where blocks are split or joined (reduce-scatter, all-gather, gather,
scatter) it is along axis 0, with rank i holding rows ``chunks.bounds(n, p)[i]``. Any row count
works, zero included. ``algorithm="mpi"`` calls the MPI library's own collective (the benchmark
baseline and a test oracle). ``"auto"`` picks by message size (``comm/choice.py``; the crossover
is measured by ``python -m scratchpar.bench collectives``).
Names ending in ``_`` work in place. ``comm/reference.py`` states what each one computes.
All-to-all and all-to-all-v, written in ``comm/all_to_all.py``, are public here too.
"""

from __future__ import annotations

import numpy as np

from scratchpar.backend import get_array_module, xp_default
from scratchpar.comm import debug, direct, doubling, ring, staging, tree
from scratchpar.comm.all_to_all import all_to_all as all_to_all
from scratchpar.comm.all_to_all import all_to_all_v as all_to_all_v
from scratchpar.comm.choice import ALL_REDUCE, auto_all_reduce, resolve, staged_once
from scratchpar.comm.chunks import bounds, counts, spans_of
from scratchpar.comm.errors import CommError
from scratchpar.comm.ops import check_op, finish
from scratchpar.comm.progress import Handle
from scratchpar.comm.watchdog import Wait


def all_reduce(comm, x, op: str = "sum", algorithm: str = "auto"):
    """A new array: ⊕ over ranks of ``x``, identical bits on every rank."""
    return all_reduce_(comm, _xp(x).array(x, copy=True, order="C"), op, algorithm)


def all_reduce_(comm, buf, op: str = "sum", algorithm: str = "auto"):
    """``buf ← ⊕ over ranks of buf`` in place; returns ``buf``."""
    if staged_once(comm, buf, algorithm):
        host, back = staging.twin(_flat(buf), comm.workspace)
        _all_reduce_now(comm, host, op, algorithm)
        back()
        return buf
    return _all_reduce_now(comm, buf, op, algorithm)


def _all_reduce_now(comm, buf, op: str, algorithm: str):
    """:func:`all_reduce_` past the choice to stage a device buffer once."""
    if (algorithm == "auto" and type(buf) is np.ndarray and comm.tracer is None
            and comm.size & (comm.size - 1) == 0 and comm.size > 1
            and auto_all_reduce(buf.nbytes, comm.size) == "recursive_doubling"):
        _begin(comm, "all_reduce", algorithm, buf, op=op)
        return _doubled_now(comm, buf, op)
    return all_reduce_start(comm, buf, op, algorithm).wait()


def _doubled_now(comm, buf, op: str):
    """Recursive doubling on a host array at a power-of-two p, blocking and without a Handle
    (``doubling.all_reduce_now``), inside the operation's record, with its scratch buffer."""
    flat = _flat(buf)
    scratch = comm.workspace.take(flat, flat.size)
    outer = comm.enter(_wait(comm, "all_reduce/recursive_doubling", buf))
    try:
        doubling.all_reduce_now(comm, flat, op, scratch)
    finally:
        comm.enter(outer)
        comm.workspace.give(scratch)
    finish(op, flat, comm.size)
    return buf


def all_reduce_start(comm, buf, op: str = "sum", algorithm: str = "auto") -> Handle:
    """Start an in-place all-reduce; ``.test()`` advances it, ``.wait()`` finishes it."""
    algorithm = _begin(comm, "all_reduce", algorithm, buf, op=op)
    result, back = buf, None
    if staged_once(comm, buf, algorithm):
        buf, back = staging.twin(_flat(buf), comm.workspace)  # reduced on the host, then back
    if algorithm == "auto":
        algorithm = auto_all_reduce(buf.nbytes, comm.size)
    flat = _flat(buf)
    wait = _wait(comm, f"all_reduce/{algorithm}", buf)
    if algorithm == "mpi":
        steps = _mpi_steps(comm, lambda: comm.mpi_allreduce(flat.copy(), flat, op))
        return Handle(comm, wait, steps, buf, after=lambda: finish(op, flat, comm.size))
    module = ALL_REDUCE[algorithm]
    scratch = comm.workspace.take(flat, -(-flat.size // comm.size) if module is ring else flat.size)

    def after():
        comm.workspace.give(scratch)
        finish(op, flat, comm.size)
        if back is not None:
            back()

    return Handle(comm, wait, module.all_reduce(comm, flat, op, scratch), result, after)


def reduce_scatter(comm, x, op: str = "sum", algorithm: str = "auto"):
    """This rank's rows ``bounds(len(x), p)[rank]`` of ⊕ over ranks of ``x``."""
    algorithm = _begin(comm, "reduce_scatter", algorithm, x, op=op)
    _need_axis(x)
    xp, row = _xp(x), _row_size(x)
    rows = counts(x.shape[0], comm.size)
    work = xp.array(x, copy=True, order="C")
    flat, spans = _flat(work), spans_of([r * row for r in rows])
    a, b = spans[comm.rank]
    if algorithm == "mpi":
        out = xp.empty(b - a, x.dtype)
        steps = _mpi_steps(comm, lambda: comm.mpi_reduce_scatter(
            flat, out, [e - s for s, e in spans], op))
    else:
        out = flat[a:b]
        scratch = comm.workspace.take(flat, max(e - s for s, e in spans))
        steps = ring.reduce_scatter(comm, flat, op, spans, scratch)
    Handle(comm, _wait(comm, f"reduce_scatter/{algorithm}", x), steps).wait()
    if algorithm != "mpi":
        comm.workspace.give(scratch)
    finish(op, out, comm.size)
    return out.reshape(rows[comm.rank], *x.shape[1:]).copy()


def all_gather(comm, x, algorithm: str = "auto", rows: list[int] | None = None):
    """Every rank's ``x`` joined along axis 0 in rank order (``rows``: each rank's row count)."""
    algorithm = _begin(comm, "all_gather", algorithm, x, shape=x.shape[1:])
    _need_axis(x)
    rows = _exchange_rows(comm, x) if rows is None else list(rows)
    if len(rows) != comm.size:
        raise CommError(f"all_gather: rows needs one count per rank ({comm.size}), got {rows}")
    if rows[comm.rank] != x.shape[0]:
        raise CommError(f"all_gather: rows[{comm.rank}] = {rows[comm.rank]} but x has "
                        f"{x.shape[0]} rows")
    xp, row = _xp(x), _row_size(x)
    out = xp.empty((sum(rows), *x.shape[1:]), x.dtype)
    flat, spans = _flat(out), spans_of([r * row for r in rows])
    if algorithm == "mpi":
        steps = _mpi_steps(comm, lambda: comm.mpi_allgather(
            _flat(xp.ascontiguousarray(x)), flat, [r * row for r in rows]))
    else:
        a, b = spans[comm.rank]
        flat[a:b] = x.reshape(-1)
        steps = ring.all_gather(comm, flat, spans)
    Handle(comm, _wait(comm, f"all_gather/{algorithm}", x), steps).wait()
    return out


def reduce_scatter_start(comm, flat, op: str = "sum", algorithm: str = "auto") -> Handle:
    """Start a reduce-scatter in place on a 1-d buffer: when done, ``flat[a:b]``, with
    ``(a, b) = bounds(flat.size, p)[rank]``, holds ⊕ over ranks of that chunk (the handle's
    result, a view). The rest of ``flat`` is left partly reduced. No copy of ``flat`` is made."""
    algorithm = _begin(comm, "reduce_scatter_start", algorithm, flat, op=op)
    flat = _flat(flat)
    spans = bounds(flat.size, comm.size)
    a, b = spans[comm.rank]
    scratch = comm.workspace.take(flat, max(e - s for s, e in spans))

    def after():
        comm.workspace.give(scratch)
        finish(op, flat[a:b], comm.size)

    steps = ring.reduce_scatter(comm, flat, op, spans, scratch)
    return Handle(comm, _wait(comm, f"reduce_scatter/{algorithm}", flat), steps, flat[a:b], after)


def all_gather_start(comm, buf, algorithm: str = "auto") -> Handle:
    """Start an all-gather in place on a 1-d buffer whose chunk ``bounds(buf.size, p)[rank]``
    each rank has filled: when done, every chunk is filled everywhere (the result, ``buf``)."""
    algorithm = _begin(comm, "all_gather_start", algorithm, buf)
    flat = _flat(buf)
    steps = ring.all_gather(comm, flat, bounds(flat.size, comm.size))
    return Handle(comm, _wait(comm, f"all_gather/{algorithm}", flat), steps, buf)


def broadcast_(comm, buf, root: int = 0, algorithm: str = "auto"):
    """Every rank's ``buf`` becomes the root's, in place; returns ``buf``."""
    algorithm = _begin(comm, "broadcast", algorithm, buf, root=root)
    flat = _flat(buf)
    if algorithm == "mpi":
        steps = _mpi_steps(comm, lambda: comm.mpi_bcast(flat, root))
    else:
        steps = tree.broadcast(comm, flat, root)
    return Handle(comm, _wait(comm, f"broadcast/{algorithm}", buf), steps, buf).wait()


def reduce(comm, x, op: str = "sum", root: int = 0, algorithm: str = "auto"):
    """⊕ over ranks of ``x`` on the root; ``None`` elsewhere."""
    algorithm = _begin(comm, "reduce", algorithm, x, op=op, root=root)
    xp = _xp(x)
    work = xp.array(x, copy=True, order="C")
    flat = _flat(work)
    if algorithm == "mpi":
        out = xp.empty_like(work) if comm.rank == root else None
        steps = _mpi_steps(comm, lambda: comm.mpi_reduce(
            flat, None if out is None else _flat(out), op, root))
    else:
        out = work
        scratch = comm.workspace.take(flat, flat.size)
        steps = tree.reduce(comm, flat, op, root, scratch)
    Handle(comm, _wait(comm, f"reduce/{algorithm}", x), steps).wait()
    if algorithm != "mpi":
        comm.workspace.give(scratch)
    if comm.rank != root:
        return None
    finish(op, out, comm.size)
    return out


def gather(comm, x, root: int = 0, algorithm: str = "auto"):
    """Every rank's ``x`` joined along axis 0 on the root; ``None`` elsewhere."""
    algorithm = _begin(comm, "gather", algorithm, x, shape=x.shape[1:], root=root)
    _need_axis(x)
    rows = _exchange_rows(comm, x)
    xp, row = _xp(x), _row_size(x)
    mine = _flat(xp.ascontiguousarray(x))
    out = xp.empty((sum(rows), *x.shape[1:]), x.dtype) if comm.rank == root else None
    flat = None if out is None else _flat(out)
    sizes = [r * row for r in rows]
    if algorithm == "mpi":
        steps = _mpi_steps(comm, lambda: comm.mpi_gather(mine, flat, sizes, root))
    else:
        steps = direct.gather(comm, mine, flat, spans_of(sizes), root)
    Handle(comm, _wait(comm, f"gather/{algorithm}", x), steps).wait()
    return out


def scatter(comm, x, root: int = 0, algorithm: str = "auto"):
    """Rank i's rows ``bounds(len(x), p)[i]`` of the root's ``x`` (pass None off the root)."""
    algorithm = _begin(comm, "scatter", algorithm, None, root=root)
    meta = (tuple(x.shape), str(x.dtype)) if comm.rank == root and x is not None else None
    meta = comm.allgather_obj(meta)[root]  # the other ranks learn their block's shape
    if meta is None:
        raise CommError(f"scatter: the root (rank {root}) passed None instead of an array")
    shape, dtype = meta
    if not shape:
        raise CommError("scatter splits along axis 0: the root's array needs a dimension")
    xp = _xp(x) if comm.rank == root else xp_default()
    rows = counts(shape[0], comm.size)
    row = int(np.prod(shape[1:], dtype=np.int64))
    mine = xp.empty((rows[comm.rank], *shape[1:]), dtype)
    full = _flat(xp.ascontiguousarray(x)) if comm.rank == root else None
    sizes = [r * row for r in rows]
    if algorithm == "mpi":
        steps = _mpi_steps(comm, lambda: comm.mpi_scatter(full, _flat(mine), sizes, root))
    else:
        steps = direct.scatter(comm, full, _flat(mine), spans_of(sizes), root)
    Handle(comm, _wait(comm, f"scatter/{algorithm}", mine), steps).wait()
    return mine


# -- shared plumbing ----------------------------------------------------------------------------
def _begin(comm, name: str, algorithm: str, x, *, op: str | None = None, root: int | None = None,
           shape=None) -> str:
    """Check the arguments before any message; in debug mode, compare the call across ranks."""
    algorithm = resolve(name, algorithm)
    if op is not None:
        check_op(op, x.dtype)
    if root is not None and not 0 <= root < comm.size:
        raise CommError(f"{name}: root {root} is outside 0..{comm.size - 1}")
    if comm.debug:
        debug.check_call(comm, name, algorithm, x, op=op, root=root, shape=shape)
    return algorithm


def _wait(comm, op: str, x) -> Wait:
    return Wait(op, comm.next_seq(), "", x.shape, x.dtype)


def _mpi_steps(comm, call):
    """MPI's collective as a one-step algorithm (it waits through the Communicator itself)."""
    call()
    yield from ()


def _xp(x):
    return get_array_module(x)


def _flat(buf):
    if not buf.flags.c_contiguous:
        raise CommError(f"collective buffers must be C-contiguous; got strides {buf.strides}")
    return buf.reshape(-1)


def _row_size(x) -> int:
    return int(np.prod(x.shape[1:], dtype=np.int64))


def _need_axis(x) -> None:
    if x.ndim == 0:
        raise CommError("this collective splits or joins along axis 0: give it a 1-d or larger "
                        "array (x.reshape(1) for a scalar)")


def _exchange_rows(comm, x) -> list[int]:
    _need_axis(x)
    return [int(r) for r in comm.allgather_obj(x.shape[0])]
