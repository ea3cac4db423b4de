"""The hybrid mesh's flags: defaults that fill any world, and one error listing every reason a
tensor-parallel split cannot work (heads, width, vocabulary, hidden sizes, dp·pp·tp), before
any message."""

import pytest

from scratchpar.train import ConfigError, load_config

HYBRID = ["--strategy", "hybrid"]


def problems(argv, world_size):
    with pytest.raises(ConfigError) as err:
        load_config(argv, world_size=world_size)
    return err.value.problems


@pytest.mark.parametrize("world, flags, dp", [(4, ["--tp", "4"], 1),
                                              (4, ["--pp", "2", "--tp", "2"], 1),
                                              (8, ["--tp", "2"], 4), (1, [], 1)])
def test_dp_defaults_to_the_world_over_pp_times_tp(world, flags, dp):
    t = load_config([*HYBRID, *flags], world_size=world).train
    assert t.replicas(world) * t.pp * t.tp == world and t.replicas(world) == dp
    assert t.m == (1 if t.pp == 1 else 2 * t.pp)  # one stage runs its batch whole


def test_every_reason_a_split_cannot_work_is_listed_at_once():
    found = problems([*HYBRID, "--tp", "3", "--dp", "2", "--n-heads", "4", "--d-model", "8",
                      "--vocab-size", "10", "--pp-schedule", "pipedream"], world_size=4)
    assert found == [
        "--dp 2 × --pp 1 × --tp 3 = 6 ranks, but the world has 4",
        "--strategy hybrid runs the synchronous pipeline; --pp-schedule pipedream updates per "
        "micro-batch (use --strategy pipeline for it)",
        "--tp 3 must divide --n-heads (4): each tensor-parallel rank holds an equal share",
        "--tp 3 must divide --d-model (8): each tensor-parallel rank holds an equal share",
        "--tp 3 must divide --vocab-size (10): each tensor-parallel rank holds an equal share"]


def test_the_mlp_splits_its_hidden_sizes_and_the_recurrent_models_do_not_split():
    assert problems([*HYBRID, "--tp", "2", "--model", "mlp", "--source", "classification",
                     "--hidden-sizes", "8,5"], 2) == [
        "--tp 2 must divide --hidden-sizes (5): each tensor-parallel rank holds an equal share"]
    assert problems([*HYBRID, "--tp", "2", "--model", "lstm"], 2) == [
        "--tp 2: model lstm has no tensor-parallel form (gpt and mlp do); use --tp 1"]
    assert problems([*HYBRID, "--model", "mlp", "--source", "classification",
                     "--sequence-parallel"], 1) == [
        "--sequence-parallel shards a transformer's sequence; model mlp has none"]


def test_tensor_flags_belong_to_the_hybrid_strategy():
    assert problems(["--strategy", "pipeline", "--tp", "2", "--sequence-parallel"], 2) == [
        "--tp, --sequence-parallel go with --strategy hybrid, not pipeline"]
    assert problems(["--tp", "2"], 2) == ["--tp goes with --strategy hybrid, not dp"]


@pytest.mark.parametrize("world, flags, dp", [(4, ["--cp", "4"], 1), (8, ["--cp", "2"], 4),
                                              (8, ["--cp", "2", "--tp", "2", "--pp", "2"], 1)])
def test_dp_defaults_to_the_world_over_pp_cp_and_tp(world, flags, dp):
    t = load_config([*HYBRID, *flags], world_size=world).train
    assert t.replicas(world) == dp and dp * t.pp * t.cp * t.tp == world


def test_every_reason_cp_cannot_split_a_sequence_is_listed_at_once():
    found = problems([*HYBRID, "--cp", "4", "--tp", "2", "--seq-len", "12", "--dropout", "0.1",
                      "--n-heads", "4", "--d-model", "8", "--cp-attention", "ulysses"], 8)
    assert found == [
        "--cp 4 with the zigzag layout cuts each sequence into 8 equal chunks: --seq-len 12 "
        "does not divide by 8",
        "--cp 4 runs without dropout (--dropout 0.1): a rank holds 1/cp of a sequence, so it "
        "cannot draw one device's mask of the whole",
        "--cp-attention ulysses shares each tensor-parallel rank's key/value heads over the 4 "
        "cp ranks: --n-heads 4 over --tp 2 gives 2, which does not divide by --cp 4"]
    assert problems([*HYBRID, "--cp", "3", "--seq-len", "12", "--cp-layout", "contiguous"],
                    4) == ["--pp 1 × --cp 3 × --tp 1 does not divide the world of 4 ranks into "
                           "replicas of the pipeline; launch a multiple of 3 ranks"]
    assert problems([*HYBRID, "--cp", "2", "--model", "lstm"], 2) == [
        "--cp 2 splits a transformer's sequence over ranks; model lstm has none (use --cp 1)"]
    assert problems(["--cp", "2"], 2) == ["--cp goes with --strategy hybrid or zero, not dp"]
