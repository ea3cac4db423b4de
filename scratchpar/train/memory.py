"""The memory a run needs per rank, estimated from its Config alone, and what this rank has."""

from __future__ import annotations

import math
import os
import resource
from dataclasses import replace

from .defaults import OWN_MODEL, SPARSE
from .memory_models import GiB, MiB, Model, gpt, mlp, recurrent
from .memory_sources import dense_source, file_size, planned
from .memory_sparse import sparse_model, sparse_source
from .strategies import REGISTRY
from .strategies.family import Layout

# Activations are counted array by array. The temporaries NumPy makes inside an op add at most
# an eighth more (tests/train/test_train_memory.py bounds the estimate against real peaks).
MARGIN = 8
RUNTIME_BYTES = MiB  # modules a run imports on first use, and its small Python objects
# What malloc keeps mapped beyond the live arrays: freed blocks stay mapped for reuse
# (allocator.keep_freed_memory). A rank's RSS less tracemalloc's live bytes measured 90-150 MiB
# over the default runs.
ALLOCATOR_BYTES = 160 * MiB
# What a rank maps before its first array: the interpreter, NumPy, mpi4py and MPICH's
# shared-memory segments. A rank's VmSize at start-up measured 415-420 MiB. A constant, not a
# reading, so that every rank refuses a run alike and the refusal is printed once.
PROCESS_BYTES = 512 * MiB
# On a GPU the arrays of the model's states and of the step live in the device's memory; the
# data source, the batches drawn (copied over once a step), a resumed checkpoint and the
# runtime stay on the host. ZeRO-Offload keeps the optimizer's state on the host too.
HOST_PARTS = ("data", "checkpoint", "runtime")


def estimate(cfg, world_size: int, bound: bool = True,
             planning: bool = False) -> dict[str, int]:
    """Peak bytes one rank (rank 0, which also evaluates) needs to train Config ``cfg`` among
    ``world_size`` ranks, by part, at the larger of the run's two peaks: setting up (weights,
    data source) or training. Python ints throughout: absurd sizes give huge figures, fast.
    ``bound``: with an op's temporaries allowed for (MARGIN), an upper bound, by which the
    training command refuses a run; without, the expected peak, which the planner predicts.
    ``planning``: its data as a plan prices it (``memory_sources.planned``).

    parameters   the weights (a rank's share, where it draws only its own); the float64 draw
                 that initializes one; local SGD's averaging buffers
    gradients    one per weight, and a parallel strategy's buckets and collective scratch
    optimizer    momentum or Adam's two moments, the update's scratch, a checkpoint's copies
    activations  a training step's, as its strategy holds them (its Layout): on
                 ceil(batch/workers) rows (the ranks that share a batch: all but a parameter
                 server's or EASGD's master), or a pipeline stage's stash of micro-batches, a
                 tensor-parallel rank's share of it: what the autograd graph keeps for backward,
                 the most that backward holds at once, the graph's Python objects; or the
                 held-out evaluation without a graph, the rows the strategy scores at a
                 time (a rank's share of a batch, a pipeline's micro-batch), if larger
    data         the source (a synthetic table and its CDF, a text's characters and ids, the
                 classifier's teacher, the sparse problems' truths) and the batches drawn
    checkpoint   what a resumed run reads of its checkpoint: the blocks this rank will hold
                 (its files' whole arrays, for a strategy that reads the state whole)
    runtime      modules and objects beyond the arrays, and the allocator's slack

    The weights, gradients and optimizer state are what the strategy's own description says
    a rank holds (its buffers count with the gradients). Where rank 0 gathers the whole model
    to evaluate it (PipeDream), that is another peak, and restoring a checkpoint one more.

    One pass: the data source; the strategy's layout of the activations (its rows, stash and
    tp); the model kind's shape function on that layout (``memory_models``); the strategy's
    description of the model states. :func:`memory_problems` then sets the sum against the
    device's budget.
    """
    o, t = cfg.optim, cfg.train
    s = 8 if t.dtype == "float64" else 4
    margin = MARGIN if bound else None
    source = planned(cfg, source_of(cfg)) if planning else source_of(cfg)
    family = REGISTRY[t.strategy]
    layout = family.activations(cfg, world_size)  # how the strategy holds a step's activations
    # the model's own figures, on the layout's rows; a held-out batch is scored this many rows
    # at a time
    model = network(cfg, s, source.vocab, layout, family.scored_rows(cfg, world_size))
    shape = model.shape
    described = family.describe(cfg, shape, world_size)  # the strategy's own figures
    # work arrays: the update's; L2 decay's second; mixed precision's fp32 gradient beside them
    scratch = 1 + (o.optimizer == "adam" and o.weight_decay > 0) + (t.precision != "fp32")
    files = _checkpoint_bytes(t.resume)
    activations = max(model.held(layout.stash), model.evaluation)
    # as the strategy starts: its share, or the whole model, and the draw of one array (cast
    # too where the array's block is cut from it, nn/unfilled.py)
    built = family.built(cfg, shape, described) + family.draws_parts(cfg) * s * shape.largest
    setup = {"parameters": built + model.init, "data": source.built}
    training = {
        "parameters": described.holds["parameters"],
        "gradients": described.holds["gradients"] + described.holds["buffers"],
        "optimizer": described.holds["optimizer"] + scratch * described.chunk * s
                     + (t.save is not None) * family.saved(cfg, shape, world_size),
        "activations": allowed(activations, margin),
        "data": source.kept + source.batches,
    }
    drawing = {**training, "activations": 0,  # a batch drawn between steps: no graph alive
               "data": source.kept + source.batches + source.drawing}
    peaks = [setup, training, drawing]
    if files:  # restoring: the state, and the blocks of the checkpoint this rank reads
        peaks.append({**training, "activations": 0,
                      "checkpoint": family.restored(described, files)})
    gathered = family.gathered(cfg, shape, world_size, described)
    if gathered is not None:  # gather_model() makes rank 0's model whole to score it
        peaks.append({**training, "parameters": gathered,
                      "activations": allowed(model.evaluation, margin)})
    return {**at_peak(cfg, peaks), "runtime": RUNTIME_BYTES + ALLOCATOR_BYTES}


def at_peak(cfg, peaks: list[dict[str, int]]) -> dict[str, int]:
    """The parts at the run's peak among its moments ``peaks``: on the CPU, the moment that
    holds the most; on a GPU, the device's memory and the host's each at its own (a run's
    host peaks at setting up, building its data, and its device's in training)."""
    if cfg.train.device != "cuda":
        return max(peaks, key=lambda part: sum(part.values()))
    device = max((on_device(cfg, part) for part in peaks), key=lambda held: sum(held.values()))
    host = max((_on_host(cfg, part) for part in peaks), key=lambda held: sum(held.values()))
    return {**host, **device}


def on_device(cfg, parts: dict[str, int]) -> dict[str, int]:
    """The parts of an estimate that a rank holds in its device's memory (on the CPU, all)."""
    if cfg.train.device != "cuda":
        return dict(parts)
    return {k: v for k, v in parts.items() if k not in _host_parts(cfg)}


def _on_host(cfg, parts: dict[str, int]) -> dict[str, int]:
    """The parts of a GPU run's estimate that stay in host memory: the rest of :func:`on_device`."""
    return {k: v for k, v in parts.items() if k in _host_parts(cfg)}


def _host_parts(cfg) -> set[str]:
    return {*HOST_PARTS, *(["optimizer"] if cfg.train.offload == "cpu" else [])}


def needed(cfg, world_size: int) -> int:
    """The bytes a rank of ``cfg`` needs by the estimate the command refuses a run by: on a
    GPU, of the device's memory (``batch fits`` and ``bench context`` search by it)."""
    return sum(on_device(cfg, estimate(cfg, world_size)).values())


def measurable(cfg, parts: dict[str, int]) -> int:
    """The bytes of an estimate that ``scratchpar.peak`` measures: the device's arrays on a
    GPU; on the CPU every part but the runtime (modules, the allocator's slack)."""
    held = on_device(cfg, parts)
    return sum(held.values()) - held.get("runtime", 0)


def allowed(activations: int, margin: int | None) -> int:
    """Activations' bytes with the temporaries of an op allowed for: a ``margin``-th more."""
    return activations + (activations // margin if margin else 0)


def source_of(cfg):
    """The estimate of the data ``cfg.data`` names: what it builds, keeps and draws."""
    return sparse_source(cfg) if cfg.data.source in SPARSE else dense_source(cfg)


def network(cfg, s: int, vocab: int, layout: Layout, evaluated: int) -> Model:
    """The estimate of the network ``cfg.model`` names, with elements of ``s`` bytes, over a
    ``vocab``-symbol language, training as ``layout`` says and evaluating ``evaluated`` rows
    at a time; under a 16-bit ``--precision``, its states as mixed precision holds them
    (:func:`in_precision`)."""
    kind, rows = cfg.model.kind, layout.rows
    if kind in {OWN_MODEL[source] for source in SPARSE}:  # the sparse problems' models
        model = sparse_model(cfg, s, rows, evaluated)
    elif kind == "mlp":
        model = mlp(cfg, s, rows, evaluated)
    elif kind == "gpt":
        model = gpt(cfg, s, vocab, rows, evaluated, layout.tp)
    else:
        model = recurrent(cfg, s, vocab, rows, evaluated)
    return model._replace(shape=in_precision(cfg, model.shape))


def in_precision(cfg, shape):
    """``shape``'s states under ``--precision``: fp16 or bf16 weights and gradients (2 bytes),
    fp32 masters and moments (Micikevicius et al. 2018; K = 12 for Adam, Rajbhandari et al.
    2020, §3). The GPT's and the MLP's saved activations are counted in 16 bits by the models
    themselves (``memory_models.value_bytes``); the sensitive ops' fp32 temporaries, and the
    recurrent models' activations, at the run's dtype, an upper bound."""
    if cfg.train.precision == "fp32":
        return shape
    return replace(shape, itemsize=2, state_itemsize=shape.itemsize, master=shape.itemsize)


def _checkpoint_bytes(directory) -> int:
    """The arrays a resumed checkpoint holds: its .npz files, stored uncompressed."""
    if directory is None or not os.path.isdir(directory):
        return 0
    return sum(file_size(os.path.join(directory, name)) for name in os.listdir(directory)
               if name.endswith(".npz"))


def available(ranks_on_node: int) -> tuple[int, str]:
    """Bytes a rank may use, and a phrase saying where the figure comes from: the machine's
    memory (MemTotal) split among the ranks sharing the node, or the address-space limit
    (ulimit -v) less what a process maps before its arrays, whichever is smaller. Both are the
    same on every rank of a node, so their refusals read alike and are reported once."""
    ranks = max(ranks_on_node, 1)
    total = _proc_field("/proc/meminfo", "MemTotal")
    if total is None:  # no /proc: the machine's physical memory
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    shared = f" shared by {ranks} ranks" if ranks > 1 else ""
    have, where = total // ranks, f"{_show(total)} on this node{shared}"
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY and limit - PROCESS_BYTES < have:
        have = max(limit - PROCESS_BYTES, 0)
        where = (f"address-space limit {_show(limit)}, less {_show(PROCESS_BYTES)} that a "
                 "process maps before its arrays")
    return have, where


def _proc_field(path: str, name: str) -> int | None:
    """A ``Name:  N kB`` line of a /proc file, in bytes; None if absent."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def device_available(ranks_on_node: int) -> tuple[int, str] | None:
    """Bytes a rank may hold on its GPU, and where the figure comes from: the device's memory
    split among the node's ranks that share it (rank r uses GPU r % count), or CuPy's memory
    pool limit (``CUPY_GPU_MEMORY_LIMIT``, bytes or a percentage of the device) where lower.
    None without CuPy: selecting the device says so next, with what to install."""
    try:
        import cupy
    except ImportError:
        return None

    count = cupy.cuda.runtime.getDeviceCount()
    total = int(cupy.cuda.runtime.getDeviceProperties(0)["totalGlobalMem"])
    sharing = -(-max(ranks_on_node, 1) // count)
    have = total // sharing
    where = f"{_show(total)} a GPU" + (f" shared by {sharing} ranks" if sharing > 1 else "")
    limit = os.environ.get("CUPY_GPU_MEMORY_LIMIT", "").strip()
    if limit:
        cap = int(float(limit[:-1]) / 100 * total) if limit.endswith("%") else int(limit)
        if cap < have:
            have, where = cap, f"CuPy's memory pool limit {_show(cap)} (CUPY_GPU_MEMORY_LIMIT)"
    return have, where


def memory_problems(cfg, world_size: int, ranks_on_node: int) -> list[str]:
    """``[]`` if the estimate fits what this rank has, else a message with the figures for
    each memory it overflows: on a GPU the device's and the host's apart (:func:`on_device`)."""
    parts = estimate(cfg, world_size)
    if cfg.train.device != "cuda":
        return _overflow(cfg, parts, *available(ranks_on_node))
    gpu = device_available(ranks_on_node)
    return ((_overflow(cfg, on_device(cfg, parts), *gpu) if gpu else [])
            + _overflow(cfg, _on_host(cfg, parts), *available(ranks_on_node)))


def _overflow(cfg, parts: dict[str, int], have: int, where: str) -> list[str]:
    need = sum(parts.values())
    if need <= have:
        return []
    shown = sorted(((v, k) for k, v in parts.items() if v * 100 >= need), reverse=True)
    detail = ", ".join(f"{k} {_show(v)}" for v, k in shown)
    return [f"this run needs about {_show(need)} per rank ({detail}) but {_show(have)} is "
            f"available ({where}); {_advice(cfg, shown[0][1])}"]


def _advice(cfg, part: str) -> str:
    """The flags that shrink ``part``, the largest, for this model and data source."""
    kind, source = cfg.model.kind, cfg.data.source
    if part == "data":
        return {"text": "train on a smaller --data file",
                "classification": "lower --n-features or --batch-size",
                "sparse-logreg": "lower --n-features, --nnz or --batch-size",
                "matrix-factorization": "lower --n-users, --n-items or --rank"}.get(
            source, "lower --vocab-size or --order")
    if part == "checkpoint":
        return "resume from a smaller checkpoint"
    if part == "runtime":
        return "free memory on this node, or raise the address-space limit (ulimit -v)"
    flags = {"gpt": ["--d-model", "--n-layers"], "mlp": ["--hidden-sizes", "--n-features"],
             "logreg": ["--nnz", "--n-features"], "factors": ["--n-users", "--n-items", "--rank"]
             }.get(kind, ["--d-model", "--d-hidden"])
    if part == "activations":
        flags = ["--batch-size", *(["--seq-len"] if kind in ("gpt", "lstm", "rnn") else []),
                 *flags]
    return f"lower {', '.join(flags[:-1])} or {flags[-1]}"


def _show(n: int) -> str:
    """Bytes in MiB below 1 GiB, else in GiB (a huge figure as a power of ten)."""
    if n < GiB:
        return f"{n / MiB:.1f} MiB"
    if n < GiB << 40:
        return f"{n / GiB:,.1f} GiB"
    return f"10^{math.log10(n) - math.log10(GiB):.0f} GiB"
