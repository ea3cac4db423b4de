"""The compute a prediction prices, timed on this machine: a pipeline stage's share."""

import pytest

from scratchpar.plan.measured import stage_shares
from scratchpar.train import load_config

RUN = ["--model", "gpt", "--d-model", "16", "--n-layers", "2", "--n-heads", "2",
       "--seq-len", "16", "--batch-size", "8"]


def test_a_stage_s_share_is_its_layers_time_cut_as_the_engine_cuts_them():
    cfg = load_config(RUN)
    shares = stage_shares(cfg, repeats=1)
    for stages in (1, 2, 4):
        got = shares(2, stages)
        assert len(got) == stages and all(f == b > 0 for f, b in got)
        assert sum(f for f, _ in got) == pytest.approx(1.0)
