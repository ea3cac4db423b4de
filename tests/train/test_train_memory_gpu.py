"""The memory estimate on a GPU: the device's memory shared by the ranks placed on it and
capped by CuPy's limit, and the parts of a run it holds, checked on a CuPy that reports two
GPUs."""

import dataclasses
import sys
import types

import pytest

from scratchpar.train import make_config
from scratchpar.train.memory import (
    device_available,
    estimate,
    measurable,
    memory_problems,
    on_device,
)


def gpu_cfg(**train):
    cfg = make_config({"train": {"device": "cuda", **train}})
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=4096))


@pytest.fixture
def two_gpus(monkeypatch):
    """A CuPy that reports two GPUs of 8 GiB: the arithmetic of a GPU's share, checked on CI."""
    runtime = types.SimpleNamespace(getDeviceCount=lambda: 2,
                                    getDeviceProperties=lambda i: {"totalGlobalMem": 8 << 30})
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=runtime)))
    monkeypatch.delenv("CUPY_GPU_MEMORY_LIMIT", raising=False)
    return monkeypatch


def test_a_gpu_is_shared_by_the_ranks_placed_on_it_and_capped_by_cupy_s_limit(two_gpus):
    assert device_available(1) == (8 << 30, "8.0 GiB a GPU")
    assert device_available(4) == (4 << 30, "8.0 GiB a GPU shared by 2 ranks")
    assert device_available(3)[0] == 4 << 30  # GPU 0 holds ranks 0 and 2
    two_gpus.setenv("CUPY_GPU_MEMORY_LIMIT", "25%")
    assert device_available(1)[0] == 2 << 30
    two_gpus.setenv("CUPY_GPU_MEMORY_LIMIT", str(1 << 30))
    assert device_available(1) == (1 << 30, "CuPy's memory pool limit 1.0 GiB "
                                            "(CUPY_GPU_MEMORY_LIMIT)")


def test_on_a_gpu_the_model_and_the_step_meet_the_device_s_memory(two_gpus):
    parts = estimate(gpu_cfg(), 1)
    assert set(on_device(gpu_cfg(), parts)) == {"parameters", "gradients", "optimizer",
                                                "activations"}
    offload = gpu_cfg(strategy="zero", offload="cpu")
    assert "optimizer" not in on_device(offload, estimate(offload, 2))
    assert measurable(gpu_cfg(), parts) == sum(on_device(gpu_cfg(), parts).values())
    assert memory_problems(gpu_cfg(), 1, 1) == []
    two_gpus.setenv("CUPY_GPU_MEMORY_LIMIT", str(64 << 20))
    (problem,) = memory_problems(gpu_cfg(), 1, 1)  # the host's parts still fit
    assert "(activations " in problem and "CUPY_GPU_MEMORY_LIMIT" in problem, problem
    assert "data " not in problem and "runtime " not in problem, problem
