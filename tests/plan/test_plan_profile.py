"""A cluster profile round-trips through its TOML file, the shipped ones load, and a malformed
one is refused with every problem listed."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from scratchpar.plan.profile import Device, Engine, Link, Profile, ProfileError, Reduce, dump, load

SHIPPED = sorted((Path(__file__).parents[2] / "scratchpar" / "plan" / "profiles").glob("*.toml"))
MEASURED = Profile(name='2 ranks "here"', source="measured\non a test", ranks_per_node=2,
                   device=Device("cpu (vm)", 12_638_251_008, 9.87e10, 3.08e10),
                   node=Link(5.737e-06, 4.166e-10), reduce=Reduce(2.13e-11),
                   engine=Engine(536_870_912))


@pytest.mark.parametrize("profile", [MEASURED, dataclasses.replace(
    MEASURED, network=Link(1e-5, 2e-11), ranks_per_node=8)])
def test_a_profile_round_trips_through_its_file(tmp_path, profile):
    path = tmp_path / "cluster.toml"
    path.write_text(dump(profile))
    assert load(path) == profile


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_the_shipped_profiles_load_and_cite_their_sources(path):
    profile = load(path)
    assert profile.network is not None and profile.ranks_per_node == 8
    assert "https://" in path.read_text() and "datasheet" in path.read_text()
    assert profile.link(same_node=True) is profile.node
    assert profile.link(same_node=False) is profile.network
    assert profile.node.seconds(1e9) < profile.network.seconds(1e9)  # NVLink beats the NIC


def test_a_link_costs_alpha_per_message_and_beta_per_byte():
    assert Link(2e-6, 1e-9).seconds(1000, messages=3) == pytest.approx(3 * 2e-6 + 1e-6)
    assert MEASURED.link(same_node=False) is MEASURED.node  # one node: every message stays in


def test_a_malformed_profile_is_refused_with_every_problem(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nranks_per_node = 0\ncolour = "blue"\nreduce = 3\n'
                    '[device]\nname = "d"\nmemory_bytes = 1.5\nflops = -1\nbytes_per_s = true\n'
                    '[node]\nalpha_s = "fast"\nbeta_s_per_byte = 1e-9\nextra = 1\n')
    with pytest.raises(ProfileError) as err:
        load(path)
    assert err.value.problems == sorted([
        "device.bytes_per_s must be a positive number, not True",
        "device.flops must be a positive number, not -1",
        "device.memory_bytes must be a positive integer, not 1.5",
        "no [engine] table", "node.alpha_s must be a positive number, not 'fast'",
        "ranks_per_node must be a positive integer, not 0", "reduce is not a table",
        "source is missing", "unknown key colour", "unknown key node.extra"])
    assert str(err.value).startswith(f"{path}: not a cluster profile:\n  - ")


@pytest.mark.parametrize("text, says", [("name = ", "Invalid value"), (b"\xff\xfe", "codec")])
def test_a_file_that_is_not_toml_is_refused(tmp_path, text, says):
    path = tmp_path / "bad.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ProfileError, match=says):
        load(path)
    with pytest.raises(ProfileError, match="No such file"):
        load(tmp_path / "absent.toml")


def test_show_prints_a_profile_or_refuses_it_in_one_message(tmp_path):
    shown = subprocess.run([sys.executable, "-m", "scratchpar.plan", "show", str(SHIPPED[0])],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and load_text(tmp_path, shown.stdout) == load(SHIPPED[0])
    (tmp_path / "bad.toml").write_text("[node]\n")
    bad = subprocess.run([sys.executable, "-m", "scratchpar.plan", "show",
                          str(tmp_path / "bad.toml")], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("scratchpar.plan: ") and "no [device] table" in bad.stderr


def load_text(tmp_path, text: str) -> Profile:
    (tmp_path / "shown.toml").write_text(text)
    return load(tmp_path / "shown.toml")


@pytest.mark.parametrize("key", ["call_s", "array_s"])
def test_the_engine_s_own_costs_may_be_left_out_and_never_negative(tmp_path, key):
    text = dump(MEASURED)
    assert f"{key} = 0.0\n" in text
    without = load_text(tmp_path, text.replace(f"{key} = 0.0\n", ""))
    assert getattr(without.engine, key) == 0.0
    with pytest.raises(ProfileError, match=rf"engine.{key} must be a number ≥ 0, not -1"):
        load_text(tmp_path, text.replace(f"{key} = 0.0", f"{key} = -1"))
