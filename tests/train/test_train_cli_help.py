"""--help is short and names the strategies, --help STRATEGY gives one family's flags,
--print-config writes TOML that reads back to the same config, and a wrong TOML key is
answered with the right one."""

import subprocess
import sys

import pytest

from scratchpar.train import load_config
from scratchpar.train.option import ConfigError
from scratchpar.train.strategies import REGISTRY


def cli(*args):
    return subprocess.run([sys.executable, "-m", "scratchpar.train", *args],
                          capture_output=True, text=True, timeout=60)


def test_help_gives_every_runs_flags_and_names_the_strategies():
    out = cli("--help")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert len(lines) < 200 and lines[0].startswith("usage:") and not lines[1].strip()
    for flag in ("--model", "--data", "--lr", "--steps", "--config", "--print-config"):
        assert flag in out.stdout
    for owned in ("--servers", "--zero-stage", "--pp-schedule", "--easgd-mode"):
        assert f"\n  {owned} " not in out.stdout  # each strategy's own: --help STRATEGY
    for name in REGISTRY:
        assert f"\n  {name:<10} " in out.stdout
    assert "[model] kind" in out.stdout and "[data] path" in out.stdout


@pytest.mark.parametrize("strategy, owns, not_shown", [
    ("ps", "--servers", "--pp"), ("hybrid", "--tp", "--servers"),
    ("zero", "--zero-stage", "--tau"), ("dp", "--bucket-mb", "--zero-stage")])
def test_help_strategy_gives_that_familys_flags(strategy, owns, not_shown):
    out = cli("--help", strategy)
    assert out.returncode == 0 and owns in out.stdout
    assert f"\n  {not_shown} " not in out.stdout and "\n  --d-model " not in out.stdout


def test_help_of_no_strategy_is_refused_naming_them():
    out = cli("--help", "bogus")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--help bogus: not a strategy; one of single, dp," in out.stderr


def test_print_config_writes_toml_that_reads_back_to_the_same_config(tmp_path):
    flags = ["--model", "lstm", "--d-hidden", "24", "--hidden-sizes", "8,9", "--data",
             __file__, "--lr", "0.25", "--no-progress", "--strategy", "ps", "--servers", "2"]
    out = cli(*flags, "--print-config")
    assert out.returncode == 0, out.stderr
    assert 'kind = "lstm"' in out.stdout and "hidden_sizes = [8, 9]" in out.stdout
    assert "# stop_after: not set (--stop-after)" in out.stdout
    (tmp_path / "run.toml").write_text(out.stdout)
    assert load_config(["--config", str(tmp_path / "run.toml")], world_size=3) == \
        load_config(flags, world_size=3)


def test_a_wrong_toml_key_is_answered_with_the_right_one(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[model]\nmodel = "lstm"\nd_modle = 32\n[train]\nlr = 0.1\nzzz = 1\n'
                    '[data]\ndata = "x.txt"\n')
    with pytest.raises(ConfigError) as err:
        load_config(["--config", str(path)])
    assert [p.split(": ", 1)[1] for p in err.value.problems] == [
        "unknown key model.model (--model is [model] kind)",
        "unknown key model.d_modle (did you mean [model] d_model?)",
        "unknown key train.lr (--lr is [optim] lr)",
        "unknown key train.zzz",
        "unknown key data.data (--data is [data] path)"]
