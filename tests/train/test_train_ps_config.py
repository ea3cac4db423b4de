"""The parameter server's flags: servers leave at least one worker, every worker gets rows,
and the flags belong to --strategy ps; each reason listed before any message."""

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
        "4 rank(s)"]
    assert problems(["--strategy", "ps", "--batch-size", "2"], 4) == [
        "train.batch_size (2) must be at least the number of workers (3): each needs a share "
        "of the global batch"]


def test_the_flags_belong_to_the_parameter_server():
    assert problems(["--servers", "2"], 4) == [
        "--servers and --ps-mode go with --strategy ps, not dp"]
