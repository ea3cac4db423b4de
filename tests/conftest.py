"""Fixtures shared across test folders."""

import os

import pytest

from scratchpar.train import make_config


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


# tests/mpi run only on real ranks, started by tests/launch/test_launch_mpi_tier.py (or make test-N)
collect_ignore = [] if os.environ.get("SCRATCHPAR_MPI_TIER") else ["mpi"]
