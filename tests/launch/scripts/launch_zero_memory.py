"""Every ZeRO stage, with and without offload, takes two steps of a small GPT with its ledger on;
rank 0 prints, per run, the bytes the ledger counted at its peak and the stage's description of
its model states for this world: ``stage S offload O: held H, estimated E``."""

from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.device_rng import DeviceRandom
from scratchpar.parallel.description import Shape
from scratchpar.parallel.ledger import Ledger
from scratchpar.parallel.zero import STAGES
from scratchpar.train import make_config
from scratchpar.train.optimizer import optimizer_factory
from scratchpar.train.task import build_task

comm = Communicator(name="world")
mesh = Mesh(comm)
for stage in (1, 2, 3):
    for offload in ("none", "cpu"):
        cfg = make_config({"model": {"d_model": 32, "n_layers": 3}, "data": {"seq_len": 16},
                           "train": {"strategy": "zero", "zero_stage": stage, "offload": offload,
                                     "batch_size": 8, "bucket_mb": 0.02}}, comm.size)
        task = build_task(cfg, DeviceRandom(0, 1, comm.rank))
        held = STAGES[stage].describe(Shape.of(task.model, 4, 2), comm.size,  # float32, AdamW
                                      cfg.train.bucket_bytes, offload == "cpu")
        strategy = STAGES[stage](task.model, optimizer_factory(cfg), task, mesh,
                                 bucket_bytes=cfg.train.bucket_bytes, grad_clip=1.0,
                                 offload=offload == "cpu")
        ledger = strategy.attach(Ledger())
        for step in range(2):
            strategy.step(task.batch(step, 8)[0])
        strategy.close()
        if comm.rank == 0:
            print(f"stage {stage} offload {offload}: held {ledger.total()}, "
                  f"estimated {held.held() + 4 * held.chunk}", flush=True)
