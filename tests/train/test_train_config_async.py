"""Hogwild's and EASGD's flags: the optimizer and rate a strategy or source brings unless the run
names its own, and every misuse refused with its reason (all reasons at once)."""

import pytest

from scratchpar.train import ConfigError, load_config


def problems(argv, world_size=1):
    with pytest.raises(ConfigError) as err:
        load_config(argv, world_size=world_size)
    return err.value.problems


def optimizer(argv, world_size=4):
    o = load_config(argv, world_size).optim
    return o.optimizer, o.momentum, o.lr


def test_the_strategies_and_sources_bring_plain_sgd_and_its_rate():
    assert optimizer([]) == ("adamw", 0.9, 6e-3)
    assert optimizer(["--strategy", "hogwild"]) == ("sgd", 0.0, 3.0)
    assert optimizer(["--source", "sparse-logreg"]) == ("sgd", 0.0, 10.0)
    assert optimizer(["--source", "matrix-factorization", "--strategy", "ps"]) == ("sgd", 0.0,
                                                                                 3.0)
    assert optimizer(["--optimizer", "sgd"]) == ("sgd", 0.9, 0.3)  # 3 × (1 − μ)
    assert optimizer(["--optimizer", "sgd", "--source", "classification"]) == ("sgd", 0.9, 0.1)
    assert optimizer(["--optimizer", "sgd", "--momentum", "0"]) == ("sgd", 0.0, 3.0)
    assert load_config(["--source", "classification"]).model.kind == "mlp"


def test_easgd_keeps_the_runs_optimizer_and_momentum_makes_it_eamsgd():
    assert optimizer(["--strategy", "easgd", "--easgd-mode", "async"]) == ("adamw", 0.9, 6e-3)
    assert optimizer(["--strategy", "easgd", "--momentum", "0.9"]) == ("sgd", 0.9, 0.3)
    assert optimizer(["--strategy", "easgd", "--momentum", "0"]) == ("sgd", 0.0, 3.0)  # EASGD
    assert optimizer(["--strategy", "easgd", "--momentum", "0.5", "--optimizer", "adam"]) == \
        ("adam", 0.5, 6e-3)


def test_hogwild_refuses_what_its_write_cannot_do():
    assert problems(["--strategy", "hogwild", "--optimizer", "adam", "--lock", "--window",
                     "one-sided"], 2) == [
        "--strategy hogwild writes the plain SGD step θ_v ← θ_v − η g_v: it needs --optimizer "
        "sgd with no --momentum or --weight-decay; got adam, momentum 0.0, weight decay 0.0",
        "--lock takes the shared window's exclusive lock: it goes with --window shared or auto, "
        "not one-sided"]
    assert problems(["--strategy", "hogwild", "--momentum", "0.5"])[0].endswith(
        "got sgd, momentum 0.5, weight decay 0.0")


def test_each_strategys_flags_go_with_it_alone():
    assert problems(["--lock", "--window", "shared", "--rho", "1", "--easgd-mode", "async"],
                    2) == [
        "--lock, --window go with --strategy hogwild, not dp",
        "--easgd-mode, --rho go with --strategy easgd, not dp"]
    assert problems(["--strategy", "easgd", "--tau", "8", "--lock"], 2) == [
        "--lock goes with --strategy hogwild, not easgd"]


def test_the_easgd_knobs_are_checked():
    assert problems(["--strategy", "easgd", "--rho", "-1", "--tau", "0"]) == [
        "--rho must be non-negative; got -1.0", "--tau must be at least 1; got 0"]
    assert problems(["--strategy", "easgd", "--easgd-mode", "round-robin", "--tau", "2"], 2) == [
        "--tau goes with --easgd-mode sync or async: round-robin exchanges with the master at "
        "every step"]
    for mode in ("async", "round-robin"):
        assert problems(["--strategy", "easgd", "--easgd-mode", mode]) == [
            f"--easgd-mode {mode} needs a master and a worker: 2 ranks or more, not 1"]


def test_the_batch_is_shared_by_the_workers_alone():
    assert problems(["--strategy", "easgd", "--easgd-mode", "async", "--batch-size", "2"], 4) == [
        "--batch-size (2) must be at least the number of workers (3): each needs a share "
        "of the global batch"]
    assert load_config(["--strategy", "easgd", "--easgd-mode", "round-robin", "--batch-size",
                        "1"], 4).train.batch_size == 1  # one worker takes the whole batch
    assert problems(["--strategy", "hogwild", "--batch-size", "3"], 4) == [
        "--batch-size (3) must be at least the number of ranks (4): each needs a share of "
        "the global batch"]
