"""A step's compute: FLOP at the device's rate, or the model's own forward and backward timed
on its data, a tensor-parallel shard's less the time inside its collectives."""

from types import SimpleNamespace

import numpy as np
import pytest

from scratchpar.device_rng import DeviceRandom
from scratchpar.plan import flops
from scratchpar.plan.compute import _inside, measured, roofline
from scratchpar.plan.profile import Device, Engine, Link, Profile, Reduce
from scratchpar.trace.tracer import Event
from scratchpar.train import load_config
from scratchpar.train.task import build_task

PROFILE = Profile("p", "by hand", 1, Device("d", 2**34, 2e12, 1e11), Link(1e-6, 1e-11),
                  Reduce(1e-12), Engine(2**29))


def test_the_roofline_is_the_rows_work_at_the_device_s_rate():
    work = flops.gpt(32, 64, 64, 2)
    assert roofline(work, 16, PROFILE) == (16 * work.forward / 2e12,
                                           16 * work.backward / 2e12)


def test_the_measured_compute_runs_the_model_s_own_forward_and_backward():
    cfg = load_config(["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--seq-len", "8",
                       "--strategy", "single"])
    task = build_task(cfg, DeviceRandom(0, 1, 0))
    forward, backward = measured(task, 4, repeats=2)
    assert forward > 0 and backward > 0
    grads = [p.grad for p in task.model.parameters()]
    assert all(g is not None and np.isfinite(g).all() for g in grads)
    assert any(np.abs(g).sum() > 0 for g in grads)  # the backward of the summed loss ran


@pytest.mark.parametrize("rows", [0, -1])
def test_no_rows_is_refused_by_the_data(rows):
    cfg = load_config(["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--seq-len", "8",
                       "--strategy", "single"])
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        measured(build_task(cfg, DeviceRandom(0, 1, 0)), rows)


def test_a_shard_s_collectives_are_counted_out_of_the_phase_they_began_in():
    """Events are ns since the tracer's origin; the forward ends at ``middle`` on the clock."""
    tracer = SimpleNamespace(origin_ns=1000, events=[
        Event("all_reduce", "comm", 0, 10), Event("matmul", "compute", 5, 50),
        Event("all_gather", "comm", 60, 100), Event("reduce_scatter", "comm", 100, 130)])
    assert _inside(SimpleNamespace(tracer=tracer), 1100) == (10 + 40, 30)
    assert _inside(None, 1100) == (0, 0)


def test_a_run_in_16_bits_multiplies_at_the_tensor_cores_rate_and_fp32_at_its_own():
    device = Device("gpu", 2**34, 9.9e14, 3e12, flops_fp32=6.7e13)
    fast = Profile("p", "by hand", 1, device, Link(1e-6, 1e-11), Reduce(1e-12), Engine(2**29))
    work = flops.gpt(32, 64, 64, 2)
    assert roofline(work, 16, fast, "bf16") == roofline(work, 16, fast, "fp16") == \
        (16 * work.forward / 9.9e14, 16 * work.backward / 9.9e14)
    assert roofline(work, 16, fast, "fp32") == (16 * work.forward / 6.7e13,
                                                16 * work.backward / 6.7e13)
    assert roofline(work, 16, PROFILE, "fp32") == roofline(work, 16, PROFILE, "bf16")  # one rate
