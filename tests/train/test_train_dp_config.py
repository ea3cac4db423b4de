"""The data-parallel flags: parsing, validation against the world size, and rank-0 reporting."""

from types import SimpleNamespace

import pytest

from scratchpar.comm.agree import RankErrors
from scratchpar.train import ConfigError, build_trainer, format_summary, load_config, make_config


def test_dp_is_the_default_and_the_flags_parse():
    default = load_config([]).train
    assert (default.strategy, default.bucket_mb) == ("dp", 1.0)
    assert (default.local_sgd_every, default.local_sgd_warmup) == (8, 0)
    t = load_config(["--strategy", "local-sgd", "--local-sgd-every", "4",
                     "--local-sgd-warmup", "2", "--bucket-mb", "0.25"]).train
    assert (t.strategy, t.local_sgd_every, t.local_sgd_warmup, t.bucket_mb) == \
        ("local-sgd", 4, 2, 0.25)


def test_every_parallel_problem_is_listed_at_once():
    with pytest.raises(ConfigError) as err:
        load_config(["--bucket-mb", "0", "--local-sgd-every", "-1", "--local-sgd-warmup", "-3",
                     "--strategy", "single", "--batch-size", "3"], world_size=4)
    text = str(err.value)
    assert len(err.value.problems) == 5, text
    for fragment in ("--bucket-mb must be positive; got 0.0",
                     "--local-sgd-every must be non-negative; got -1",
                     "--local-sgd-warmup must be non-negative; got -3",
                     "--strategy single runs on one rank; launched on 4",
                     "--batch-size (3) must be at least the number of ranks (4)"):
        assert fragment in text


def test_the_noise_scale_goes_with_data_parallelism_and_one_device():
    assert load_config(["--noise-scale"], world_size=2).train.noise_scale
    assert load_config(["--strategy", "dp-naive", "--noise-scale"], world_size=2).train.noise_scale
    assert load_config(["--strategy", "single", "--noise-scale"]).train.noise_scale
    with pytest.raises(ConfigError) as err:
        load_config(["--strategy", "zero", "--noise-scale"], world_size=2)
    assert err.value.problems == [
        "--noise-scale goes with --strategy single or dp or dp-naive, not zero"]
    with pytest.raises(ConfigError) as err:  # one rank has no shards to compare
        load_config(["--noise-scale"], world_size=1)
    assert err.value.problems == [
        "--noise-scale with --strategy dp compares the ranks' shards, and needs 2 ranks or "
        "more; on one device, --strategy single compares the batch's two halves"]


def test_the_same_flags_are_valid_on_fewer_ranks():
    assert load_config(["--batch-size", "3"], world_size=3).train.batch_size == 3
    assert make_config({"train": {"strategy": "single"}}).train.strategy == "single"
    with pytest.raises(ConfigError, match="launched on 2"):
        make_config({"train": {"strategy": "single"}}, world_size=2)


def test_build_trainer_checks_the_config_against_the_world_it_is_given(tiny_config):
    # rank 0 of a world whose other rank found nothing: the agreement reports rank 0's problem
    two_ranks = SimpleNamespace(rank=0, size=2, local_rank=0, local_size=2,
                                allgather_obj=lambda mine, what: [mine, []])
    with pytest.raises(RankErrors, match="rank 0 of 2: invalid configuration:\n  - --strategy "
                                         "single runs on one rank; launched on 2"):
        build_trainer(tiny_config(strategy="single"), two_ranks)


def test_summary_gives_throughput_in_total_and_per_rank():
    s = {"step": 6, "steps_run": 6, "eval_loss": 2.0, "floor": 1.5, "gap": 0.5, "unit": "tok",
         "measure": "nats", "units_per_s": 8000.0, "units_per_s_per_rank": 2000.0, "world": 4,
         "elapsed_s": 3.0}
    line = format_summary(s)
    assert "· 8,000 tok/s (2,000 per rank × 4) · 6 steps in 3.0 s" in line
    assert "per rank" not in format_summary({**s, "world": 1, "units_per_s_per_rank": 8000.0})
