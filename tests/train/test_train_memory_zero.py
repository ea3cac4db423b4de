"""ZeRO's memory estimate: each stage's model states per rank follow Rajbhandari et al.'s figures
plus what this engine holds beside them, from the model's real sizes; they bound what the
strategies' own ledgers count, not loosely; offload adds the master copy; and no rank of
stage 3 holds the whole model to evaluate or save it."""

import math

import pytest

from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.device_rng import DeviceRandom
from scratchpar.parallel.description import Shape
from scratchpar.parallel.ledger import Ledger
from scratchpar.parallel.zero import STAGES
from scratchpar.train import make_config
from scratchpar.train.memory import estimate
from scratchpar.train.optimizer import optimizer_factory
from scratchpar.train.task import build_task

S = 4  # float32
MODELS = {
    "gpt": ({"kind": "gpt", "d_model": 16, "n_heads": 2, "n_layers": 3}, {}),
    "gpt tied": ({"kind": "gpt", "d_model": 16, "n_heads": 2, "tie_embeddings": True}, {}),
    "lstm": ({"kind": "lstm", "d_model": 8, "d_hidden": 16}, {}),
    "rnn": ({"kind": "rnn", "d_model": 8, "d_hidden": 16}, {}),
    "mlp": ({"kind": "mlp", "hidden_sizes": (32, 48, 32)},
            {"source": "classification", "n_features": 16}),
    "logreg": ({}, {"source": "sparse-logreg", "n_features": 64, "nnz": 4}),
}


def zero(stage: int, offload: str = "none", model=None, data=None, **train):
    return make_config({"model": model or {}, "data": {"seq_len": 8, **(data or {})},
                        "train": {"strategy": "zero", "zero_stage": stage, "offload": offload,
                                  "batch_size": 4, **train}})


def states(cfg, world: int, task) -> tuple[int, int, int]:
    """The estimate's model states for ``task``'s model, from the stage's description:
    parameters, gradients (with the buffers of their reduction), optimizer state and its work
    arrays."""
    moments = 2 if cfg.optim.optimizer != "sgd" else int(cfg.optim.momentum > 0)
    t = cfg.train
    held = STAGES[t.zero_stage].describe(Shape.of(task.model, S, moments), world,
                                         t.bucket_bytes, t.offload == "cpu")
    h = held.holds
    return h["parameters"], h["gradients"] + h["buffers"], h["optimizer"] + S * held.chunk


@pytest.mark.parametrize("world", [1, 4, 5])
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_each_stage_keeps_zeros_share_and_what_the_engine_holds_beside(stage, world):
    cfg = zero(stage, model=MODELS["gpt"][0], bucket_mb=1 / 64)  # AdamW: K = 2·s
    model = build_task(cfg, DeviceRandom(0, 1)).model
    sizes = [p.data.size for p in model.parameters()]
    units = sorted(sum(p.data.size for p in layer.parameters())
                   for layer in model.pipeline_layers())
    psi, full = sum(sizes), S * sum(sizes)
    shard = S * -(-psi // world)  # rank 0's chunks are the larger ones
    bucket = max(cfg.train.bucket_bytes, S * max(sizes))  # a larger parameter fills one alone
    group = bucket if stage < 3 else S * units[-1]  # what is packed at once: a bucket or a unit
    in_flight = 0 if stage == 1 else full  # every bucket may still be reducing
    want = {"parameters": full if stage < 3 else shard + S * sum(units[-3:]),
            "gradients": (full if stage == 1 else shard) + in_flight + group + shard,
            "optimizer": 2 * shard + S * -(-(group // S) // world)}  # moments, one work array
    assert dict(zip(want, states(cfg, world, build_task(cfg, DeviceRandom(0, 1))))) == want


@pytest.fixture(scope="module")
def one_rank():
    mesh = Mesh(Communicator(name="world"))
    yield mesh
    mesh.free()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_estimate_bounds_what_every_stage_holds_on_one_rank(name, one_rank):
    model, data = MODELS[name]
    for stage in (1, 2, 3):
        for offload in ("none", "cpu"):
            cfg = zero(stage, offload, model, data, bucket_mb=0.01)
            task = build_task(cfg, DeviceRandom(0, 1))
            bound = states(cfg, 1, task)  # before stage 3 frees the model's arrays
            strategy = STAGES[stage](task.model, optimizer_factory(cfg), task, one_rank,
                                     bucket_bytes=cfg.train.bucket_bytes, grad_clip=1.0,
                                     offload=offload == "cpu")
            ledger = strategy.attach(Ledger())
            for step in range(2):
                strategy.step(task.batch(step, 4)[0])
            held, peak = ledger.total(), ledger.peak
            what = (name, stage, offload, bound, ledger.at_peak)
            assert held <= sum(bound) <= 2 * held, what
            assert peak["parameters"] + peak.get("gathered", 0) <= bound[0], what


def test_offload_adds_the_master_copy_and_a_save_adds_nothing():
    psi = sum(p.data.size for p in build_task(zero(1), DeviceRandom(0, 1)).model.parameters())
    for stage in (1, 2, 3):
        plain, offloaded = estimate(zero(stage), 4), estimate(zero(stage, "cpu"), 4)
        copies = 2 if stage == 1 else 1  # stage 1 also copies its gradient chunk to the host
        assert offloaded["optimizer"] - plain["optimizer"] == copies * S * psi // 4
        assert {k: v for k, v in offloaded.items() if k != "optimizer"} == \
            {k: v for k, v in plain.items() if k != "optimizer"}
        assert estimate(zero(stage, save="unused"), 4) == plain  # each rank writes its chunks


def test_stage_3s_rank_0_never_holds_the_whole_model_after_setting_up():
    """It scores the held-out batches in its layout, a layer gathered at a time, and saves
    its chunks: the training's parameters are its chunk and the layers it gathers at once."""
    wide = {"kind": "gpt", "d_model": 256, "n_heads": 4, "n_layers": 4}  # 13 MB of weights
    cfg = zero(3, model=wide, data={"vocab_size": 256, "order": 1}, batch_size=16, save="x")
    psi = sum(p.data.size for p in build_task(cfg, DeviceRandom(0, 1)).model.parameters())
    for world in (8, 16):
        parameters = estimate(cfg, world)["parameters"]
        assert S * math.ceil(psi / world) < parameters < S * psi
