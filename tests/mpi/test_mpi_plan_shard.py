"""The planner's compute of a tensor-parallel shard, timed on the shard itself over real ranks:
every rank of the group times its own shard (the model it was cut from is left untouched),
and the communicator is left as it was found (its own tracer, or none)."""

from scratchpar.device_rng import DeviceRandom
from scratchpar.plan.compute import measured_shard
from scratchpar.trace.tracer import Tracer
from scratchpar.train import load_config
from scratchpar.train.task import build_task


def test_a_shard_s_forward_and_backward_are_timed_on_every_rank_of_its_group(comm):
    cfg = load_config(["--d-model", "8", "--n-heads", "2", "--n-layers", "1", "--seq-len", "6",
                       "--strategy", "single"])
    task = build_task(cfg, DeviceRandom(0, 1, 0))
    for sequence_parallel in (False, True):
        forward, backward = measured_shard(task, comm.size, comm, sequence_parallel, repeats=2)
        assert forward > 0 and backward > 0
        assert comm.tracer is None
    comm.tracer = kept = Tracer(comm.rank)  # a run's own tracer, there before the timing
    measured_shard(task, comm.size, comm, False, repeats=1)
    assert comm.tracer is kept and not kept.events
    comm.tracer = None
    everything = comm.allgather_obj((forward, backward), "shard compute")
    assert len(everything) == comm.size and all(f > 0 and b > 0 for f, b in everything)
    assert all(p.grad is None for p in task.model.parameters())  # the shard's own, not these
