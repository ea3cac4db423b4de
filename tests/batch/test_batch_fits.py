"""The largest batch that fits a budget, by the training command's own estimate: it fits and
the next batch the command accepts does not, a strategy that frees model states fits more, a
budget too small for any batch says so, and the command's steps at it run under the budget."""

import json

import pytest

from scratchpar.batch.__main__ import main
from scratchpar.batch.fits import largest, least_batch, need
from scratchpar.batch.studies import FIT_LAYOUTS
from scratchpar.train import ConfigError
from scratchpar.train.memory import ALLOCATOR_BYTES, PROCESS_BYTES, RUNTIME_BYTES

GiB = 1 << 30
GPT = ["--model", "gpt", "--d-model", "32", "--n-layers", "2", "--n-heads", "2",
       "--seq-len", "32"]
LAYOUTS = [([*GPT, "--strategy", "single"], 1), (GPT, 2),
           ([*GPT, "--strategy", "zero", "--zero-stage", "3"], 2),
           ([*GPT, "--strategy", "pipeline", "--pp", "2", "--microbatches", "4"], 2),
           ([*GPT, "--strategy", "hybrid", "--tp", "2"], 2),
           (["--model", "mlp", "--source", "classification", "--strategy", "single"], 1)]


@pytest.mark.parametrize("flags, world", LAYOUTS)
def test_the_largest_batch_fits_and_the_next_one_up_does_not(flags, world):
    found = largest(flags, world, GiB)
    batch, step = found["batch"], found["step"]
    assert batch % step == 0 and batch >= step
    assert need(flags, world, batch) == found["need"] <= GiB - PROCESS_BYTES < found["next"]
    assert found["next"] == need(flags, world, batch + step)


def test_the_least_batch_is_a_row_a_rank_or_a_pipeline_s_micro_batches():
    assert least_batch(GPT, 2) == 2
    assert least_batch([*GPT, "--strategy", "pipeline", "--pp", "2", "--microbatches", "4"],
                       2) == 4
    with pytest.raises(ConfigError, match="--pp"):  # the flags themselves are refused
        least_batch([*GPT, "--strategy", "pipeline", "--pp", "3"], 2)


def test_zero_frees_model_states_for_rows():
    wide = ["--model", "gpt", "--d-model", "256", "--n-layers", "6", "--n-heads", "4",
            "--seq-len", "16", "--vocab-size", "2048", "--order", "1"]
    dp, zero3 = (largest([*wide, *more], 4, 1 * GiB)["batch"]
                 for more in ([], ["--strategy", "zero", "--zero-stage", "3"]))
    assert zero3 > dp


def test_a_budget_below_the_least_batch_says_so():
    found = largest(GPT, 2, PROCESS_BYTES + (1 << 20))
    assert found["batch"] is None and found["need"] > found["have"] == 1 << 20


def test_the_command_s_steps_run_at_the_largest_batch_within_the_estimate(tmp_path):
    """Under an address-space limit of the budget, the training command's own two steps at
    each model's and layout's largest batch run, their measured peak is within the estimate's
    bound, and the figure is drawn."""
    out, figures = tmp_path / "fits.json", tmp_path / "figures"
    assert main(["fits", "--quick", "--budget", "0.75", "--json", str(out),
                 "--figures", str(figures)]) == 0
    models = json.loads(out.read_text())["models"]
    assert list(models) == ["gpt", "mlp"]
    for found in models.values():
        rows = found["rows"]
        assert [r["layout"] for r in rows] == [name for name, _, _ in FIT_LAYOUTS]
        for r in rows:
            assert r["batch"] and "not_run" not in r, r
            assert r["peak"] <= (r["need_mib"] * 2**20 - RUNTIME_BYTES - ALLOCATOR_BYTES)
    assert (figures / "batch_fits.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
