"""``--cuda-graph`` on the command line: which runs may capture their step, each refusal a
line, and the strategy each builds (the graphs themselves: tests/parallel, tests/mpi)."""

import dataclasses

import pytest

from scratchpar.comm.mesh import Mesh
from scratchpar.comm.mpi import Communicator
from scratchpar.device_rng import DeviceRandom
from scratchpar.optim import SGD
from scratchpar.parallel import CapturedDataParallel, SingleDevice
from scratchpar.train import load_config
from scratchpar.train.option import ConfigError
from scratchpar.train.strategies import REGISTRY
from scratchpar.train.task import build_task


@pytest.mark.parametrize("flags, refused", [
    (["--strategy", "dp"], "it needs --device cuda"),
    (["--strategy", "dp-naive", "--device", "cuda"], "goes with --strategy single or dp"),
    (["--strategy", "dp", "--device", "cuda", "--noise-scale"], "the noise scale's shards"),
    (["--strategy", "single", "--device", "cuda", "--noise-scale"], "the noise scale's shards"),
])
def test_what_a_captured_step_cannot_hold_is_refused_with_a_line(flags, refused):
    with pytest.raises(ConfigError, match=refused):
        load_config([*flags, "--cuda-graph"], world_size=1 if "single" in flags else 2)


@pytest.mark.parametrize("strategy, cls", [("single", SingleDevice),
                                           ("dp", CapturedDataParallel)])
def test_one_device_and_data_parallelism_build_their_captured_step(strategy, cls):
    """Dropout is taken: its stream goes into the graph as an origin in device memory."""
    cfg = load_config(["--strategy", strategy, "--device", "cuda", "--cuda-graph",
                       "--dropout", "0.1"], world_size=1)
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, device="cpu"))
    task = build_task(cfg, DeviceRandom(0, 1))  # built here on the CPU: no GPU in CI
    mesh = None if strategy == "single" else Mesh(Communicator(name="graph"))
    try:
        built = REGISTRY[strategy].build(cfg, task, lambda ps: SGD(ps, lr=0.1), mesh)
        assert type(built) is cls and built.replayed.stream is not None
    finally:
        if mesh is not None:
            mesh.free()
