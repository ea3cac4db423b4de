"""ZeRO's checkpoint pieces: each rank writes and reads its own chunks, of the parameters and
of the optimizer's state, as ranges of the one-device arrays they cut (Rajbhandari et al.
2020, §5: rank r owns chunk r of every flat group). No rank gathers a whole array."""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module
from ...comm.agree import agree
from ..pieces import Block, Piece


def ranges(zero, k: int) -> list[tuple[int, Block, int, int]]:
    """Group k's chunk on this rank as ranges of whole arrays: per array it touches, the
    array's index in the one-device order, its block (elements ``[start, stop)`` of it
    raveled) and where they lie in the chunk ``[at, at + stop − start)``."""
    group, out = zero.groups[k], []
    for i, start, stop, at in group.mine.pieces:
        j = zero.index[id(group.params[i])]
        out.append((j, Block.flat(zero.shapes[j], start, stop), at, at + stop - start))
    return out


def zero_pieces(zero) -> tuple[list[Piece], dict]:
    """This rank's chunks: of the parameters under the model's names, of each optimizer
    buffer under ``"<buffer>.<index>"``; the counters, step and rate as scalars."""
    zero.update.flush()  # an offloaded update's last chunks, up on the device
    names = [name for name, _ in zero.model.named_parameters()]
    opt, pieces = zero.optimizer, []
    optim = {"step_count": opt.step_count, "lr": opt.lr}
    for k in range(len(zero.groups)):
        chunk, state = zero._chunk(k), opt.state[k]
        for i, block, lo, hi in ranges(zero, k):
            pieces.append(Piece("model", names[i], block, chunk[lo:hi]))
            pieces += [Piece("optim", f"{b}.{i}", block, state[b][lo:hi])
                       for b in opt.buffers if b in state]
            optim.update({f"{c}.{i}": state[c] for c in opt.counters if c in state})
    return pieces, {"model": {}, "optim": optim}


def load_zero_pieces(zero, stored) -> None:
    """This rank's chunks from a checkpoint's blocks (any strategy, stage or N wrote it).
    Every block is read and checked before anything changes, and the ranks agree that all of
    them could read theirs before the collectives that make the parameters whole: a rank whose
    blocks are bad would otherwise leave the others waiting in them."""
    problems, read = [], None
    try:
        read = _read(zero, stored)
    except (RuntimeError, ValueError, KeyError, TypeError) as e:  # a block bad on this rank
        problems.append(str(e))
    agree(zero.comm, problems)  # raises on every rank if any rank could not read its chunks
    chunks, sd = read
    for k, chunk in enumerate(chunks):
        mine = zero._chunk(k)
        mine[...] = get_array_module(mine).asarray(chunk)
    zero.update.refresh()  # before the parameters are made whole from the chunks
    zero._refresh()
    zero.optimizer.load_state_dict(sd)


def _read(zero, stored) -> tuple[list, dict]:
    """This rank's chunk of every group's parameters, and its optimizer state dict."""
    names = [name for name, _ in zero.model.named_parameters()]
    unexpected = sorted(set(stored.names("model")) - set(names))
    if unexpected:
        raise ValueError(f"the checkpoint has {', '.join(unexpected)}, which the model has not")
    opt, held = zero.optimizer, set(stored.names("optim"))
    scalars = stored.scalars("optim")
    chunks, sd = [], {k: scalars[k] for k in ("step_count", "lr") if k in scalars}
    for k, group in enumerate(zero.groups):
        xp = get_array_module(zero.update.shards[k].data)
        parts = ranges(zero, k)
        chunk = np.empty(group.mine.size, group.dtype)
        for i, block, lo, hi in parts:
            chunk[lo:hi] = stored.read("model", names[i], block).reshape(-1)
        chunks.append(chunk)
        for b in opt.buffers:
            present = [f"{b}.{zero.index[id(p)]}" in held for p in group.params]
            if all(present):  # the optimizer's own memory: the device's or the host's
                buf = np.empty(group.mine.size, opt.state_dtype(group.dtype))
                for i, block, lo, hi in parts:
                    buf[lo:hi] = stored.read("optim", f"{b}.{i}", block).reshape(-1)
                sd[f"{b}.{k}"] = xp.asarray(buf)
            elif any(present):
                raise ValueError(f"optimizer state {b!r} is missing for some parameters of "
                                 "a group and present for others")
        for c in opt.counters:
            values = {scalars.get(f"{c}.{zero.index[id(p)]}") for p in group.params} - {None}
            if len(values) > 1:
                raise ValueError(f"optimizer counter {c!r} differs within a group")
            if values:
                sd[f"{c}.{k}"] = values.pop()
    return chunks, sd
