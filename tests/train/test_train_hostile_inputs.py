"""Hostile values, paths and files, each of which would otherwise end in a traceback (or lose the
run), are refused up front, with the reason, before anything is built."""

import json
import os
import socket

import pytest

from scratchpar.comm.agree import RankErrors
from scratchpar.train import ConfigError, build_trainer, load_config, save_checkpoint

TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--seq-len", "12",
        "--vocab-size", "10", "--order", "1", "--steps", "4", "--batch-size", "2",
        "--eval-batches", "1", "--no-progress"]


@pytest.mark.parametrize("flags, reason", [
    (["--lr", "inf"], "--lr must be a finite number; got inf"),
    (["--lr", "1e999"], "--lr must be a finite number; got inf"),
    (["--lr", "nan"], "--lr must be a finite number; got nan"),
    (["--vocab-size", "2048", "--order", "2"], "2048**3 entries, more than 4194304; lower"),
    (["--order", "22"], "10**23 entries, more than 4194304"),
    (["--concentration", "inf"], "--concentration must be a finite number; got inf"),
    (["--mean-length", "inf"], "--mean-length must be a finite number; got inf"),
    (["--seed", "-1"], "--seed must be non-negative; got -1"),
    (["--bucket-mb", "inf"], "--bucket-mb must be a finite number; got inf"),
    (["--bucket-mb", "1e-7"], "--bucket-mb (1e-07) rounds to 0 bytes"),
    (["--grad-clip", "inf"], "--grad-clip must be a finite number; got inf"),
    (["--warmup", "4"], "--warmup (4) must be less than --steps (4)"),
    (["--hidden-sizes", "3,,4"], "argument --hidden-sizes: expected integers separated by commas"),
    (["--steps", "five"], "argument --steps: invalid int value: 'five'"),
    (["--bogus"], "unrecognized arguments: --bogus (python -m scratchpar.train --help lists"),
])
def test_a_value_later_code_would_reject_is_rejected_by_validation(flags, reason):
    with pytest.raises(ConfigError) as err:
        load_config([*TINY, *flags])
    assert reason in str(err.value)


def test_a_short_run_gets_a_short_warmup_but_an_explicit_long_one_is_still_an_error():
    assert load_config(["--steps", "5"]).optim.warmup == 0
    assert load_config(["--steps", "40"]).optim.warmup == 4
    assert load_config([]).optim.warmup == 100  # the default run: 1500 steps, capped
    with pytest.raises(ConfigError, match=r"--warmup \(9\) must be less than --steps"):
        load_config(["--steps", "5", "--warmup", "9"])


def refused(tmp_path, *flags) -> str:
    """The report of a run that must stop before training; nothing is written."""
    cfg = load_config([*TINY, "--metrics", str(tmp_path / "m.jsonl"), *flags])
    with pytest.raises(RankErrors) as err:
        build_trainer(cfg)
    assert not (tmp_path / "m.jsonl").exists()
    return str(err.value)


def test_pipes_devices_and_links_that_lead_nowhere_are_refused_as_outputs(tmp_path):
    os.mkfifo(tmp_path / "fifo")  # opening it to write would block the run
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "x")
    report = refused(tmp_path, "--trace", str(tmp_path / "fifo"), "--strategy", "dp",
                     "--save", str(tmp_path / "loop" / "ck"))
    assert "--trace" in report and "is not a regular file (a pipe, a device)" in report
    assert f"cannot be created: {tmp_path}/loop is a symbolic link that leads nowhere" in report
    assert "is not a regular file" in refused(tmp_path, "--save", str(tmp_path / "ck"),
                                              "--trace", "/dev/full", "--strategy", "dp")
    assert "is a symbolic link that leads nowhere" in refused(
        tmp_path, "--trace", str(tmp_path / "dangling"), "--strategy", "dp")
    (tmp_path / "ck").mkdir()
    os.mkfifo(tmp_path / "ck" / "meta.json")  # reading it would block the run
    assert "not a checkpoint (no meta.json file)" in refused(tmp_path, "--resume",
                                                              str(tmp_path / "ck"))


def test_output_paths_are_checked_before_the_first_step(tmp_path):
    (tmp_path / "file").write_text("a regular file")
    (tmp_path / "somedir").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("the user's own work")
    under = f"--trace '{tmp_path}/file/x.json': cannot be created: {tmp_path}/file is not a " \
        "directory"
    assert under in refused(tmp_path, "--trace", str(tmp_path / "file" / "x.json"),
                            "--strategy", "dp")
    assert "--save" in refused(tmp_path, "--save", str(tmp_path / "file" / "ck"))
    assert "is a directory; give a file name" in \
        refused(tmp_path, "--metrics", str(tmp_path / "somedir"))
    cfg = load_config([*TINY, "--metrics", ""])
    with pytest.raises(RankErrors, match="--metrics '': an empty path"):
        build_trainer(cfg)
    assert "exists and is not a checkpoint; refusing to replace it" in \
        refused(tmp_path, "--save", str(tmp_path / "notes"))
    assert (tmp_path / "notes" / "keep.txt").read_text() == "the user's own work"
    assert "--metrics and --save name the same path" in \
        refused(tmp_path, "--save", str(tmp_path / "m.jsonl"))
    assert "lies inside --save" in refused(tmp_path, "--save", str(tmp_path),
                                           "--strategy", "single")


@pytest.mark.parametrize("content, reason", [
    (b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "not UTF-8 text"),
    (b"[model]\nd_model = ", "Invalid value"),
    (b"[model]\nd_model = 1.5\nhidden_sizes = ['a']", "model.d_model: expected int, got 1.5"),
    (b"[model]\nhidden_sizes = [1.5]", "model.hidden_sizes: expected a list of integers"),
    (b"[optim]\nlr = 'fast'", "optim.lr: expected float, got 'fast'"),
])
def test_a_config_file_is_read_defensively(tmp_path, content, reason):
    (tmp_path / "run.toml").write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_config(["--config", str(tmp_path / "run.toml")])
    assert reason in str(err.value)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(["--config", str(tmp_path)])


@pytest.mark.parametrize("meta, reason", [
    ([1, 2, 3], "meta.json holds a list, not an object"),
    ("text", "meta.json holds a str, not an object"),
    ({"sha256": {"../../etc/passwd": "0"}}, "lists no checksums, or malformed ones"),
])
def test_a_checkpoint_whose_metadata_is_json_but_not_ours_is_refused(tmp_path, meta, reason):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "meta.json").write_text(json.dumps(meta))
    assert reason in refused(tmp_path, "--resume", str(tmp_path / "ck"))


@pytest.mark.parametrize("edit, reason", [
    (lambda m: m.update(step="3"), "its step, '3', is not an integer"),
    (lambda m: m.update(step=True), "its step, True, is not an integer"),
    (lambda m: m.update(step=99), "it is at step 99, and this run stops at step 4"),
    (lambda m: m.update(dropout_rng="x"), "does not fit this run"),
    (lambda m: m["dropout_rng"][0].update(state="x"), "does not fit this run"),
    (lambda m: m["scalars"].update(model=[1]), "the scalars of model are not a table"),
    (lambda m: m["arrays"]["model"].popitem(), "does not fit this run"),
    (lambda m: m.update(format="sharded-9"), "in the format 'sharded-9', which this version"),
])
def test_a_checkpoint_edited_by_hand_does_not_fit_and_says_so(tmp_path, edit, reason):
    cfg = load_config([*TINY, "--strategy", "single", "--save", str(tmp_path / "ck"),
                       "--metrics", str(tmp_path / "a.jsonl"), "--stop-after", "2"])
    build_trainer(cfg).run()
    meta = json.loads((tmp_path / "ck" / "meta.json").read_text())
    edit(meta)
    (tmp_path / "ck" / "meta.json").write_text(json.dumps(meta))
    assert reason in refused(tmp_path, "--strategy", "single", "--resume", str(tmp_path / "ck"))


def test_a_save_removes_what_dead_writers_left_and_keeps_the_rest(tmp_path):
    host = socket.gethostname()
    dead = [tmp_path / f".ck.tmp-{host}-999999999", tmp_path / ".ck.old-999999999"]
    kept = [tmp_path / f".ck.old-{host}-{os.getppid()}",  # its writer is alive
            tmp_path / ".ck.tmp-otherhost-1",  # another host's: cannot be checked from here
            tmp_path / ".ck.notes"]  # not a temporary at all
    for path in dead + kept:
        path.mkdir()
    save_checkpoint(tmp_path / "ck", {"model": {}}, {"step": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ck"] + [p.name for p in kept])


def test_a_save_cut_off_between_its_renames_is_pointed_to(tmp_path):
    save_checkpoint(tmp_path / "ck", {"model": {}}, {"step": 1})
    (tmp_path / "ck").rename(tmp_path / ".ck.old-somehost-12")
    assert f"(a save was cut off: the previous checkpoint is in {tmp_path}/.ck.old-somehost-12)" \
        in refused(tmp_path, "--resume", str(tmp_path / "ck"))
