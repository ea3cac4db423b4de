"""ZeRO's flags: --strategy zero with --zero-stage and --offload from flags or TOML, the two
flags refused without it, otherwise dp's rules (every violation listed at once); and the run
builds the stage they name, which on a world of one rank trains as one device does."""

import numpy as np
import pytest
from device_helpers import host
from test_train_dp_parity import exact, losses, params

from scratchpar.parallel.zero import STAGES
from scratchpar.train import ConfigError, build_trainer, load_config, make_config


def problems(argv, world_size=1):
    with pytest.raises(ConfigError) as err:
        load_config(argv, world_size=world_size)
    return err.value.problems


def test_the_defaults_are_stage_1_without_offload_and_the_flags_parse():
    t = load_config(["--strategy", "zero"], world_size=4).train
    assert (t.strategy, t.zero_stage, t.offload) == ("zero", 1, "none")
    for stage in (1, 2, 3):
        t = load_config(["--strategy", "zero", "--zero-stage", str(stage), "--offload", "cpu",
                         "--bucket-mb", "0.25"], world_size=2).train
        assert (t.zero_stage, t.offload, t.bucket_bytes) == (stage, "cpu", 1 << 18)
    t = load_config([]).train
    assert (t.strategy, t.zero_stage, t.offload) == ("dp", 1, "none")


def test_toml_sets_the_zero_flags_and_the_command_line_overrides_it(tmp_path):
    toml = tmp_path / "zero.toml"
    toml.write_text('[train]\nstrategy = "zero"\nzero_stage = 2\noffload = "cpu"\n')
    t = load_config(["--config", str(toml)], world_size=2).train
    assert (t.strategy, t.zero_stage, t.offload) == ("zero", 2, "cpu")
    t = load_config(["--config", str(toml), "--zero-stage", "3", "--offload", "none"], 2).train
    assert (t.strategy, t.zero_stage, t.offload) == ("zero", 3, "none")


def test_values_outside_the_choices_are_refused_by_flag_and_by_toml(tmp_path):
    (stage,) = problems(["--strategy", "zero", "--zero-stage", "4"])
    assert "argument --zero-stage: invalid choice: 4 (choose from 1, 2, 3)" in stage
    (offload,) = problems(["--strategy", "zero", "--offload", "gpu"])
    assert "argument --offload: invalid choice: 'gpu'" in offload
    toml = tmp_path / "bad.toml"
    toml.write_text('[train]\nstrategy = "zero"\nzero_stage = 0\noffload = "CPU"\n')
    assert problems(["--config", str(toml)]) == [
        "--zero-stage must be one of 1, 2, 3; got 0",
        "--offload must be one of none, cpu; got 'CPU'"]
    with pytest.raises(ConfigError) as err:
        make_config({"train": {"strategy": "zero", "zero_stage": True, "offload": 1}})
    assert err.value.problems == ["train.zero_stage: expected int, got True",
                                  "train.offload: expected str, got 1"]


def test_the_zero_flags_go_with_strategy_zero_alone():
    assert problems(["--offload", "cpu"], 2) == ["--offload goes with --strategy zero, not dp"]
    assert problems(["--zero-stage", "3"], 2) == [
        "--zero-stage goes with --strategy zero, not dp"]
    assert problems(["--strategy", "ps", "--zero-stage", "2", "--offload", "cpu"], 2) == [
        "--zero-stage, --offload go with --strategy zero, not ps"]
    # the defaults, given explicitly, are no misuse
    assert load_config(["--zero-stage", "1", "--offload", "none"], 2).train.strategy == "dp"


def test_zero_follows_dps_rules_and_every_violation_is_listed_at_once():
    assert load_config(["--strategy", "zero", "--zero-stage", "3"]).train.zero_stage == 3
    assert load_config(["--strategy", "zero", "--batch-size", "3"], 3).train.batch_size == 3
    assert problems(["--strategy", "zero", "--zero-stage", "3", "--batch-size", "3",
                     "--pp", "2", "--lock", "--bucket-mb", "0"], 4) == [
        "--bucket-mb must be positive; got 0.0",
        "--pp goes with --strategy pipeline or hybrid, not zero",
        "--lock goes with --strategy hogwild, not zero",
        "--batch-size (3) must be at least the number of ranks (4): each needs a share of "
        "the global batch"]


@pytest.mark.parametrize("stage, offload", [(1, "none"), (2, "cpu"), (3, "none"), (3, "cpu")])
def test_the_run_builds_its_stage_which_trains_as_one_device_on_one_rank(tiny_config, tmp_path,
                                                                          stage, offload):
    single = exact(tiny_config, strategy="single", metrics=str(tmp_path / "single.jsonl"))
    one_device = build_trainer(single)
    one_device.run()
    cfg = exact(tiny_config, strategy="zero", zero_stage=stage, offload=offload,
                bucket_mb=0.01)
    trainer = build_trainer(cfg)
    zero = trainer.strategy
    assert type(zero) is STAGES[stage] and zero.comm.size == 1
    assert (zero.update.offloaded, zero.grad_clip) == (offload == "cpu", cfg.optim.grad_clip)
    trainer.run()
    np.testing.assert_allclose(losses(cfg), losses(single), rtol=1e-9)
    whole = trainer.strategy.state_dict()["model"]  # stage 3's chunks, gathered here alone
    for name, value in params(one_device).items():
        np.testing.assert_allclose(host(whole[name]), value, rtol=1e-9, atol=1e-10)


def test_cp_splits_the_world_into_replicas_and_keeps_the_hybrid_s_rules():
    t = load_config(["--strategy", "zero", "--cp", "2"], world_size=4).train
    assert t.cp == 2 and (t.cp_attention, t.cp_layout) == ("ring", "zigzag")
    assert problems(["--strategy", "zero", "--cp", "2", "--seq-len", "6", "--dropout", "0.1"],
                    world_size=3) == [
        "--cp 2 does not divide the world of 3 ranks into replicas",
        "--cp 2 with the zigzag layout cuts each sequence into 4 equal chunks: --seq-len 6 does "
        "not divide by 4",
        "--cp 2 runs without dropout (--dropout 0.1): a rank holds 1/cp of a sequence, so it "
        "cannot draw one device's mask of the whole"]
