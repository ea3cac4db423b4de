"""A plan prices a model of a real vocabulary without building its data: the synthetic table's
rule binds the training command, not the planner, and the vocabulary counts in the parameters
and the stage cut as the built model counts it; a text's vocabulary is read once."""

import numpy as np
import pytest

from scratchpar import nn
from scratchpar.plan.__main__ import main
from scratchpar.plan.predict import shape_of
from scratchpar.plan.stages import parameters
from scratchpar.train import ConfigError, load_config, memory_sources
from scratchpar.train.memory import estimate, source_of

RUN = ["--model", "gpt", "--d-model", "16", "--n-layers", "2", "--n-heads", "2",
       "--seq-len", "8", "--batch-size", "8"]


def test_the_training_command_refuses_a_table_the_planner_never_builds():
    with pytest.raises(ConfigError, match="synthetic language's table"):
        load_config([*RUN, "--vocab-size", "51200"])
    cfg = load_config([*RUN, "--vocab-size", "51200"], planning=True)
    source = memory_sources.planned(cfg, source_of(cfg))
    assert source.vocab == 51200 and source.built == source.kept == 0 < source.batches
    assert estimate(cfg, 1, planning=True)["data"] == source.batches
    assert estimate(cfg, 1)["data"] > 2**40  # the table, which the training command refuses
    small = load_config(RUN, planning=True)  # a table that fits is the run's own
    assert memory_sources.planned(small, source_of(small)) == source_of(small)


def test_the_vocabulary_counts_as_the_built_model_counts_it():
    cfg = load_config([*RUN, "--vocab-size", "5000"], planning=True)
    built = nn.GPT(5000, 8, 16, 2, 2, np.random.default_rng(0))
    assert shape_of(cfg).psi == sum(p.size for p in built.parameters())
    assert parameters(cfg, 5000)[-1] == built.pipeline_layers()[-1].head.weight.size + 2 * 16


def test_a_plan_of_a_real_vocabulary_runs(capsys):
    assert main(["--world", "8", "--profile", "dgx-a100", "--top", "3", "--",
                 *RUN, "--vocab-size", "51200"]) == 0
    assert "best: mpirun -n 8" in capsys.readouterr().out


def test_a_text_is_read_once_however_many_layouts_ask(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("abcab\nca", encoding="utf-8")
    memory_sources._scanned.cache_clear()
    sizes = [memory_sources._text_vocab(str(text), text.stat().st_size) for _ in range(5)]
    assert sizes == [5] * 5 and memory_sources._scanned.cache_info().misses == 1
    text.write_text("abcdefg", encoding="utf-8")  # another version of the file: read again
    assert memory_sources._text_vocab(str(text), text.stat().st_size) == 8
