"""The parameter server's flags: servers leave at least one worker, every worker gets rows,
the flags belong to --strategy ps and each knob to its mode, and a checkpoint never falls
inside a push window; each reason listed before any message."""

import pytest

from scratchpar.train import ConfigError, load_config


def problems(argv, world_size):
    with pytest.raises(ConfigError) as err:
        load_config(argv, world_size=world_size)
    return err.value.problems


def test_servers_must_leave_a_worker_with_rows():
    assert load_config(["--strategy", "ps", "--servers", "2"], world_size=4).train.servers == 2
    assert problems(["--strategy", "ps", "--servers", "4", "--batch-size", "1"], 4) == [
        "--strategy ps needs 1 ≤ --servers < ranks, so that a worker remains: --servers 4 on "
        "4 ranks"]
    assert problems(["--strategy", "ps"], 1) == [  # a count agrees with its noun
        "--strategy ps needs 1 ≤ --servers < ranks, so that a worker remains: --servers 1 on "
        "1 rank"]
    assert problems(["--strategy", "ps", "--batch-size", "2"], 4) == [
        "--batch-size (2) must be at least the number of workers (3): each needs a share "
        "of the global batch"]


def test_the_flags_belong_to_the_parameter_server():
    assert problems(["--servers", "2"], 4) == ["--servers goes with --strategy ps, not dp"]
    assert problems(["--servers", "2", "--staleness", "0"], 4) == [
        "--servers, --staleness go with --strategy ps, not dp"]


def test_each_knob_belongs_to_its_mode():
    ps = ["--strategy", "ps"]
    ok = load_config([*ps, "--ps-mode", "async", "--n-push", "2", "--n-fetch", "3",
                      "--warmup-sync", "5"], world_size=3).train
    assert (ok.ps_mode, ok.n_push, ok.n_fetch, ok.warmup_sync) == ("async", 2, 3, 5)
    assert load_config([*ps, "--ps-mode", "ssp", "--staleness", "0"], world_size=3) \
        .train.staleness == 0
    assert problems([*ps, "--staleness", "1", "--n-push", "2"], 3) == [
        "--staleness goes with --ps-mode ssp, not sync",
        "--n-push goes with --ps-mode async, not sync"]
    assert problems([*ps, "--ps-mode", "locked", "--warmup-sync", "4"], 3) == [
        "--warmup-sync goes with --ps-mode async, not locked"]
    assert problems([*ps, "--ps-mode", "ssp", "--staleness", "-1"], 3) == [
        "--staleness must be at least 0; got -1"]
    assert problems([*ps, "--ps-mode", "async", "--n-fetch", "0", "--warmup-sync", "-2"], 3) \
        == ["--warmup-sync must be at least 0; got -2", "--n-fetch must be at least 1; got 0"]


def test_a_checkpoint_falls_between_pushes():
    flags = ["--strategy", "ps", "--ps-mode", "async", "--n-push", "4", "--save", "ck"]
    assert load_config([*flags, "--save-every", "8"], world_size=3).train.save_every == 8
    assert problems([*flags, "--save-every", "6"], 3) == [
        "--save-every (6) must be a multiple of --n-push (4): a checkpoint is taken when no "
        "worker holds an unpushed gradient"]
