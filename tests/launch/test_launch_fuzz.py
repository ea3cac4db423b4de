"""The seeded fuzzer over ``python -m scratchpar.train``'s flags: every case ends with exit 0, 2
or 3, no traceback, no line printed twice, within its time and memory limits.

``make test`` runs the first 50 cases of seed 0; ``make fuzz`` runs more
(``SCRATCHPAR_FUZZ_CASES=300 SCRATCHPAR_FUZZ_SEED=…``). The files are fuzz_flags (the table),
fuzz_cases (the generator), fuzz_files (inputs, checkpoints, corruptions), fuzz_run (the judge).
"""

import os

import pytest
from fuzz_cases import RANKS, SCENARIOS, cases, make_case
from fuzz_flags import FLAGS, parser_flags
from fuzz_run import Result, check, command, judge, launch, prepare, tagged

SEED = int(os.environ.get("SCRATCHPAR_FUZZ_SEED", "0"))
N_CASES = int(os.environ.get("SCRATCHPAR_FUZZ_CASES", "50"))
CASES = cases(SEED, N_CASES)


@pytest.fixture(scope="session")
def prepared(tmp_path_factory):
    return prepare(tmp_path_factory.mktemp("fuzz-checkpoints"))


def test_every_flag_of_the_cli_has_an_entry_in_the_fuzz_table():
    missing = sorted(set(parser_flags()) - set(FLAGS))
    assert not missing, (f"flags without an entry in tests/launch/fuzz_flags.py FLAGS: {missing}; "
                         "a strategy that adds a flag adds its valid, boundary and hostile values")
    stale = sorted(set(FLAGS) - set(parser_flags()))
    assert not stale, f"FLAGS in tests/launch/fuzz_flags.py names flags the CLI lacks: {stale}"


def test_cases_are_reproducible_and_the_first_50_cover_every_scenario_and_world_size():
    assert cases(SEED, N_CASES) == CASES
    assert make_case(SEED, 7) != make_case(SEED + 1, 7)
    first = cases(0, 50)
    assert {c.scenario for c in first} == set(SCENARIOS)
    assert {c.ranks for c in first} == set(RANKS)


def test_the_judge_fails_what_breaks_the_contract(tmp_path):
    def verdict(code, out="", err="", trains=True):
        return judge(Result([], tmp_path, code, out, err, 0.0), trains)

    assert verdict(0, "final: step 6 · …\n") == []
    assert verdict(2, err="scratchpar.train: bad\n  - x\n") == []
    assert verdict(0, "") == ["exit 0 with 0 'final:' lines on stdout"]
    assert verdict(0, "[model]\nkind = \"gpt\"\n", trains=False) == []  # --print-config
    assert verdict(0, "final: step 6\n", trains=False) == [
        "exit 0 with 1 'final:' lines on stdout", "--print-config exited 0 without printing the "
        "config"]
    assert verdict(1, "final: x\n") == ["exit 1, not one of (0, 2, 3)"]
    assert verdict(None) == ["still running after 0 s: killed"]
    assert verdict(2, err="usage: x\n") == [
        "exit 2 without a 'scratchpar.train:' message on stderr"]
    assert verdict(2, err="scratchpar.train: a\nscratchpar.train: a\n") == [
        "printed twice: 'scratchpar.train: a'"]
    assert verdict(2, err="scratchpar.train: rank 0 of 2: 1.5 GiB\n"
                          "scratchpar.train: rank 1 of 2: 1.6 GiB\n") == [
        "printed twice but for its numbers: 'scratchpar.train: rank 0 of 2: 1.5 GiB', "
        "'scratchpar.train: rank 1 of 2: 1.6 GiB'"]
    assert verdict(2, err="Traceback (most recent call last):\nscratchpar.train: a\n") == [
        "a traceback"]
    assert verdict(2, err="scratchpar.train: a\n\n\n 50%|##  | 3/6\r 50%|##  | 3/6\n") == []
    banner = "=" * 83 + "\n=   EXIT CODE: 9\n" + "=" * 83 + "\nPlease see the FAQ page\n"
    assert verdict(9, err=banner * 2) == ["exit 9, not one of (0, 2, 3)"]


def test_a_timed_out_job_is_killed_by_pid_though_its_ranks_left_its_session(tmp_path):
    hang = "import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(600)"  # a grandchild
    r = launch([*command(2, [], tmp_path)[:4], "-c", hang], tmp_path, timeout=3)
    assert r.returncode is None and judge(r) == ["still running after 3 s: killed"]
    assert len(r.tag) == 32 and tagged(r.tag) == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_fuzz_case(case, prepared, tmp_path):
    check(case, tmp_path, prepared)
