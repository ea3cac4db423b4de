"""Fixtures shared across test folders, and the device every test runs on."""

import os

import pytest

from scratchpar import backend
from scratchpar.autograd.precision import PrecisionError, dtype_of
from scratchpar.train import make_config

# Suites that run twice in `make test`: on NumPy and on the device double (CuPy's rules on the
# CPU). A later strategy's suite joins by adding its folder here. `--device cuda` (or `double`,
# or `cpu`) runs every collected test on that one device instead.
DEVICE_SUITES = ("autograd", "nn", "optim", "comm", "mpi")


def pytest_addoption(parser):
    parser.addoption("--device", choices=backend.DEVICES, default=None,
                     help="run every test on this device (default: cpu, and the double too "
                          f"for the suites {', '.join(DEVICE_SUITES)})")


def pytest_generate_tests(metafunc):
    if "device" not in metafunc.fixturenames:
        return
    chosen = metafunc.config.getoption("--device") or os.environ.get("SCRATCHPAR_TEST_DEVICE")
    if chosen:
        metafunc.parametrize("device", [chosen], indirect=True)
    elif metafunc.definition.path.parent.name in DEVICE_SUITES:
        metafunc.parametrize("device", ["cpu", "double"], indirect=True)


@pytest.fixture(autouse=True)
def device(request):
    """The device this test runs on (``backend.set_device``): models, batches and gradients
    built with ``backend.to_device`` live there. Restored to the CPU afterwards."""
    name = getattr(request, "param", "cpu")
    backend.set_device(name)
    yield name
    backend.set_device("cpu")


@pytest.fixture
def tiny_config(tmp_path):
    """A factory of small configs: a 2-layer GPT with dropout on a small synthetic language."""

    def make(**train):
        return make_config({
            "model": {"kind": "gpt", "d_model": 16, "n_heads": 2, "n_layers": 2, "dropout": 0.1},
            "data": {"vocab_size": 10, "order": 1, "seq_len": 12, "mean_length": 6.0},
            "optim": {"warmup": 2},
            "train": {"steps": 10, "batch_size": 4, "log_every": 3, "eval_batches": 2,
                      "progress": False, "metrics": str(tmp_path / "metrics.jsonl"), **train},
        })

    return make


@pytest.fixture(params=["fp16", "bf16"])
def low(request, device):
    """(name, dtype) of a 16-bit format on the test's device; bf16 is skipped where the backend
    has none (the double, as CuPy)."""
    try:
        return request.param, dtype_of(request.param, backend.xp_default())
    except PrecisionError as e:
        pytest.skip(str(e))


# tests/mpi run only on real ranks, started by tests/launch/test_launch_mpi_tier.py (or make test-N)
collect_ignore = [] if os.environ.get("SCRATCHPAR_MPI_TIER") else ["mpi"]
