"""The strategies' descriptions: the estimate's shapes are the built models', the paper's bytes
per rank, ZeRO-3's 1.5× volume, DP's buckets and a pipeline's messages."""

import numpy as np
import pytest

from scratchpar.comm.buckets import Buckets
from scratchpar.device_rng import DeviceRandom
from scratchpar.parallel import (
    DataParallel,
    DataParallelNaive,
    Hybrid,
    Pipeline,
    SingleDevice,
    ZeRO1,
    ZeRO2,
    ZeRO3,
)
from scratchpar.parallel.description import TOTALS, Shape
from scratchpar.parallel.pipeline.schedules import build
from scratchpar.parallel.ps.roles import Roles
from scratchpar.train import make_config
from scratchpar.train.memory import network
from scratchpar.train.strategies.family import Layout
from scratchpar.train.task import build_task

CONFIGS = {
    "gpt": ({"kind": "gpt", "d_model": 16, "n_heads": 2, "n_layers": 3}, {}),
    "gpt tied": ({"kind": "gpt", "d_model": 16, "n_heads": 2, "n_layers": 4,
                  "tie_embeddings": True}, {}),
    "lstm": ({"kind": "lstm", "d_model": 8, "d_hidden": 12, "n_layers": 2}, {}),
    "rnn": ({"kind": "rnn", "d_model": 8, "d_hidden": 12}, {}),
    "mlp": ({"kind": "mlp", "hidden_sizes": (32, 48, 24, 8)},
            {"source": "classification", "n_features": 16}),
    "logreg": ({}, {"source": "sparse-logreg", "n_features": 64, "nnz": 4}),
    "factors": ({}, {"source": "matrix-factorization", "n_users": 30, "n_items": 20}),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("dtype, optimizer", [("float32", "adamw"), ("float64", "sgd")])
def test_the_estimates_shape_is_the_built_models(name, dtype, optimizer):
    model, data = CONFIGS[name]
    cfg = make_config({"model": model, "data": {"seq_len": 8, **data},
                       "optim": {"optimizer": optimizer},
                       "train": {"dtype": dtype, "batch_size": 4}})
    task = build_task(cfg, DeviceRandom(0, 1))
    s = np.dtype(dtype).itemsize
    estimated = network(cfg, s, getattr(task.dataset, "vocab_size", 0), Layout(4), 4).shape
    built = Shape.of(task.model, s, estimated.moments, estimated.boundary)
    assert estimated == built
    assert estimated.moments == (2 if optimizer == "adamw" else int(cfg.optim.momentum > 0))


PSI, N = 3 * 4 * 5 * 7 * 64, 4  # every chunk, bucket and layer divides it
SHAPE = Shape(PSI, 4, 2, PSI // 16, 32, depth=4, layer=PSI // 4, stack=3 * PSI // 4)


def test_each_rank_holds_the_papers_bytes_with_adam_in_float32():
    """Rajbhandari et al. 2020, Figure 1: 16Ψ replicated; 4Ψ + 4Ψ + 8Ψ/N, 4Ψ + 12Ψ/N, 16Ψ/N."""
    assert SingleDevice.describe(SHAPE).held() == 16 * PSI
    dp = DataParallel.describe(SHAPE, N).holds
    assert (dp["parameters"], dp["gradients"], dp["optimizer"]) == (4 * PSI, 4 * PSI, 8 * PSI)
    stage = {k: ZeRO.describe(SHAPE, N, bucket_bytes=PSI).holds for k, ZeRO in
             ((1, ZeRO1), (2, ZeRO2), (3, ZeRO3))}
    assert [(h["parameters"], h["gradients"], h["optimizer"]) for h in stage.values()] == [
        (4 * PSI, 4 * PSI, 8 * PSI // N), (4 * PSI, 4 * PSI // N, 8 * PSI // N),
        (4 * PSI // N + 4 * SHAPE.stack, 4 * PSI // N, 8 * PSI // N)]  # + the layers gathered
    offloaded = ZeRO2.describe(SHAPE, N, bucket_bytes=PSI, offload=True)
    assert offloaded.on_host == (8 + 4 + 4) * PSI // N  # Ren et al. 2021: state, grads, master


def test_each_description_counts_the_arrays_its_update_steps():
    """Each parameter array (or flat shard) and its moments: an op on each costs a call."""
    sgd = Shape(PSI, 4, 0, PSI // 16, 32, depth=4)
    assert DataParallel.describe(SHAPE, N).arrays == 32 * 3
    assert DataParallel.describe(sgd, N).arrays == SingleDevice.describe(sgd).arrays == 32
    groups = DataParallel.describe(SHAPE, N, bucket_bytes=PSI).sends[0].count  # one a bucket
    assert ZeRO1.describe(SHAPE, N, bucket_bytes=PSI).arrays == groups * 3
    assert ZeRO3.describe(SHAPE, N).arrays == SHAPE.depth * 3  # a flat group a layer
    server = Roles.describe(SHAPE, 6, servers=1)
    assert server.on_host and server.arrays == 3  # its range of the keys: one flat array
    assert Pipeline.describe(SHAPE, 2, pp=2, m=2, rows=4).arrays == 16 * 3  # half the arrays


def test_zero3_moves_one_and_a_half_times_data_parallels_bytes():
    """Rajbhandari et al. 2020, §7: stage 3 reduce-scatters the gradient and all-gathers the
    parameters twice, 3Ψ against the all-reduce's 2Ψ."""
    def wire(description, op):
        return sum(m.wire(N) * m.count for m in description.sends if m.op == op)

    dp = wire(DataParallel.describe(SHAPE, N, bucket_bytes=PSI), "all-reduce")
    zero3 = ZeRO3.describe(SHAPE, N)
    moved = wire(zero3, "reduce-scatter") + wire(zero3, "all-gather")
    assert moved == pytest.approx(1.5 * (dp - 2 * (N - 1) / N * 16))  # DP's loss pair aside


def test_data_parallel_describes_at_least_the_buckets_it_plans():
    cfg = make_config({"model": CONFIGS["gpt"][0], "data": {"seq_len": 8}})
    model = build_task(cfg, DeviceRandom(0, 1)).model
    shape = Shape.of(model, 4, 2)
    for bucket_bytes in (256, 4096, 1 << 20):
        planned = len(Buckets([p.data for p in model.parameters()[::-1]], bucket_bytes))
        (buckets, _) = DataParallel.describe(shape, 2, bucket_bytes).sends
        assert buckets.count >= planned and buckets.count * buckets.nbytes >= shape.bytes
        assert buckets.behind == "backward"
    (each, _) = DataParallelNaive.describe(shape, 2).sends
    assert each.count == len(model.parameters()) and each.behind == ""


@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2),
                                         ("pipedream", 1)])
def test_a_pipeline_sends_each_micro_batchs_activation_and_its_gradient(schedule, v):
    shape = Shape(PSI, 4, 2, PSI // 16, 32, depth=8, layer=PSI // 8, boundary=64 * 16 * 4)
    pipe = Pipeline.describe(shape, 4, pp=2, m=4, v=v, rows=16)
    acts, grads = (m for m in pipe.sends if m.axis == "pp")
    built = build(schedule, 2, 4, v)  # the schedule's own messages, at its busiest rank
    assert (acts.count, grads.count) == tuple(
        max(sum(a.kind == kind for a in actions) for actions in built.values())
        for kind in ("SEND_ACT", "SEND_GRAD")) == (4 * v, 4 * v)
    assert acts.nbytes == grads.nbytes == 16 // (2 * 4) * 64 * 16 * 4  # a replica's micro-batch
    assert any(m.axis == "dp" for m in pipe.sends)  # two replicas sum their stages' gradients
    assert pipe.holds["parameters"] < 4 * PSI  # a stage, not the model
    alone = Pipeline.describe(shape, 1, pp=1, m=4, v=2, rows=16)
    assert all(m.count == 0 for m in alone.sends if m.axis == "pp")  # hand-offs, no message


@pytest.mark.parametrize("sp", [False, True])
def test_a_hybrid_s_replicas_reduce_each_rank_s_shard_of_its_stage(sp):
    shape = Shape(PSI, 4, 2, PSI // 16, 32, depth=8, layer=PSI // 8, boundary=64 * 16 * 4)
    piped = Pipeline.describe(shape, 16, pp=2, m=4, rows=32, tp=2)
    mesh = Hybrid.describe(shape, 16, pp=2, m=4, rows=32, tp=2, sequence_parallel=sp)
    (whole,), (shard,) = ([m for m in d.sends if m.axis == "dp"] for d in (piped, mesh))
    assert shard.nbytes == -(-whole.nbytes // 2) and shard.count == whole.count
    assert mesh.holds["gradients"] == -(-piped.holds["gradients"] // 2)


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("ep", [2, 4])
def test_an_ep_rank_holds_its_experts_and_trades_its_tokens_twice_each_way(ep, tp):
    """With half the parameters in experts, ep divides that half of every state (tp the
    other); per sparse layer and micro-batch a rank's k·a bytes go out twice forward and
    twice backward, (ep − 1)/ep of them on the wire (the issue's 2·(ep − 1)/ep·k·tokens·h·β)."""
    shape = Shape(PSI, 4, 2, PSI // 16, 32, depth=8, layer=PSI // 8, boundary=64 * 16 * 4)
    dense = Hybrid.describe(shape, 8 * tp, pp=2, m=4, rows=32, tp=tp)
    sparse = Hybrid.describe(shape, 8 * tp, pp=2, m=4, rows=32, tp=tp, ep=ep,
                             sparse=(6, PSI // 2, 2))
    for part in ("parameters", "gradients", "optimizer"):
        whole = dense.holds[part] * tp  # the stage's, unsplit
        assert sparse.holds[part] == pytest.approx(whole / 2 / tp + whole / 2 / ep, abs=2)
    (act,) = [m for m in sparse.sends if m.axis == "pp" and m.behind == "forward"]
    passes = 3 * 4  # the stage's 3 of the 6 sparse layers, 4 micro-batches
    for phase in ("forward", "backward"):
        sent = sum(m.wire(ep) * m.count for m in sparse.sends
                   if m.axis == "ep" and m.behind == phase)
        assert sent == pytest.approx(2 * (ep - 1) / ep * 2 * act.nbytes * passes)
    assert not [m for m in dense.sends if m.axis == "ep"]


@pytest.mark.parametrize("attention", ["ring", "allgather", "ulysses"])
@pytest.mark.parametrize("cp", [2, 4])
def test_a_cp_rank_holds_its_positions_and_sends_its_scheme_s_bytes(attention, cp):
    """Per layer forward, a rank's K and V travel 2(cp − 1)·a bytes by ring or all-gather, and
    Ulysses' four all-to-alls 4(cp − 1)/cp·a, ``a`` its micro-batch's activation (the
    issue's 2·S·b·h·β and 4·S·b·h·β/cp)."""
    shape = Shape(PSI, 4, 2, PSI // 16, 32, depth=8, layer=PSI // 8, boundary=64 * 16 * 4)
    whole = Hybrid.describe(shape, 2, pp=2, m=4, rows=32)
    split = Hybrid.describe(shape, 2 * cp, pp=2, m=4, rows=32, cp=cp, attention=attention)
    states = ("parameters", "gradients", "optimizer")  # replicated over cp, and summed over it
    assert [split.holds[k] for k in states] == [whole.holds[k] for k in states]
    assert whole.holds["buffers"] == 0 < split.holds["buffers"]
    (act,), (act_cp,) = ([m for m in d.sends if m.axis == "pp" and m.behind == "forward"]
                         for d in (whole, split))
    assert act_cp.nbytes == act.nbytes // cp  # a stage hands on its positions alone
    (reduce,) = [m for m in split.sends if m.axis == "dp×cp"]  # the grads sum over dp × cp
    assert reduce.op == "all-reduce"
    a, passes = act_cp.nbytes, 4 * 4  # the stage's 4 layers, 4 micro-batches
    forward = sum(m.wire(cp) * m.count for m in split.sends
                  if m.axis == "cp" and m.behind == "forward")
    want = 4 * (cp - 1) / cp * a if attention == "ulysses" else 2 * (cp - 1) * a
    assert forward == pytest.approx(want * passes)


def test_16_bit_gradients_summed_in_fp32_are_sent_and_bucketed_in_fp32():
    """``--grad-reduce fp32``: bf16 gradients beside fp32 masters are reduced in fp32, so
    the buckets (and the naive sum's scratch) hold 4 bytes an element and send as many."""
    bf16 = Shape(PSI, 2, 2, PSI // 16, 32, depth=4, master=4)
    for cls in (DataParallel, DataParallelNaive):
        narrow, wide = (cls.describe(bf16, N, wide=w) for w in (False, True))
        sent = [sum(m.nbytes * m.count for m in d.sends if m.nbytes > TOTALS)
                for d in (narrow, wide)]
        assert sent[1] == pytest.approx(2 * sent[0], rel=0.01) and sent[1] >= 4 * PSI
        assert wide.holds["buffers"] - narrow.holds["buffers"] == 2 * PSI  # a copy, 2 B → 4 B
