"""``python -m scratchpar.checkpoint``: info lists what a run saved, consolidate writes the same
state whole, which then loads to the same bits, and a bad checkpoint ends with one line, exit 2."""

import json

import numpy as np
import pytest
from device_helpers import host

from scratchpar.checkpoint import main
from scratchpar.train import build_trainer, load_checkpoint, open_checkpoint
from scratchpar.train.precision import AtPrecision


def saved(tmp_path, tiny_config, **train) -> str:
    directory = str(tmp_path / "ck")
    build_trainer(tiny_config(stop_after=3, save=directory, **train)).run()
    return directory


def test_info_names_the_run_its_parts_and_its_files(tmp_path, tiny_config, capsys):
    directory = saved(tmp_path, tiny_config)
    assert main(["info", directory, "--verify", "--json"]) == 0
    about = json.loads(capsys.readouterr().out)
    assert (about["format"], about["step"], about["ranks"]) == ("sharded-1", 3, 1)
    whole, _ = load_checkpoint(directory)
    model = next(p for p in about["parts"] if p["part"] == "model")
    assert model["arrays"] == len(whole["model"])
    assert model["elements"] == sum(a.size for a in whole["model"].values())
    assert [f["file"] for f in about["files"]] == ["rank0.pieces.npz"]
    assert sum(f["bytes"] for f in about["files"]) == sum(p["bytes"] for p in about["parts"])
    assert main(["info", directory]) == 0
    assert "every piece read" not in capsys.readouterr().out


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_consolidate_writes_the_same_state_whole(tmp_path, tiny_config, capsys, precision):
    """The copy is read at either precision as the checkpoint is (a 16-bit run's masters as
    its weights), and resumes to the same bits."""
    directory = saved(tmp_path, tiny_config, precision=precision)
    assert main(["consolidate", directory, str(tmp_path / "whole")]) == 0
    assert sorted(p.name for p in (tmp_path / "whole").iterdir()) == [
        "meta.json", "model.npz", "optim.npz"]
    names = load_checkpoint(directory)[1]["parameters"]
    for sixteen in (False, True):
        with open_checkpoint(directory) as a, open_checkpoint(tmp_path / "whole") as b:
            a, b = AtPrecision(a, names, sixteen).state(), AtPrecision(b, names, sixteen).state()
        assert a.keys() == b.keys()
        for part in a:
            assert a[part].keys() == b[part].keys()
            for name, value in a[part].items():
                assert np.array_equal(np.asarray(b[part][name], np.float64),
                                      np.asarray(value, np.float64)), name
    ends = [build_trainer(tiny_config(resume=ck, precision=precision)) for ck in
            (directory, str(tmp_path / "whole"))]
    for trainer in ends:
        trainer.run()
    assert [host(p.data).tobytes() for p in ends[0].task.model.parameters()] == \
        [host(p.data).tobytes() for p in ends[1].task.model.parameters()]


def test_a_checkpoint_that_cannot_be_read_is_one_line_and_exit_2(tmp_path, tiny_config, capsys):
    assert main(["info", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == f"scratchpar.checkpoint: {tmp_path}/none: no such " \
                                      "directory\n"
    directory = saved(tmp_path, tiny_config)
    assert main(["consolidate", directory, directory]) == 2
    (tmp_path / "ck" / "rank0.pieces.npz").write_bytes(b"not a zip")
    assert main(["info", directory, "--verify"]) == 2
    assert "is truncated or corrupt" in capsys.readouterr().err
