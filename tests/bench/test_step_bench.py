"""Smoke tests of ``python -m scratchpar.bench step``: runs, checks equivalence, prints its rows."""

import json
import sys

import numpy as np
import pytest

import scratchpar.bench
from scratchpar.bench.__main__ import main
from scratchpar.bench.step.cases import Case, Contender
from scratchpar.bench.step.driver import NotEquivalent, compare
from scratchpar.bench.timing import Timed, on_host


def rows_of(out: str) -> set[tuple[str, str]]:
    """(case, contender) of every timing-table line."""
    return {tuple(line.split()[:2]) for line in out.splitlines()
            if line.split()[:1] in (["mlp"], ["gpt"]) and len(line.split()) >= 6}


def test_step_quick_prints_every_row_after_the_equivalence_check(capsys, tmp_path):
    path = tmp_path / "step.json"
    assert main(["step", "--quick", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "before timing: OK" in out
    expected = {("mlp", "scratchpar"), ("mlp", "floor"), ("gpt", "scratchpar")}
    torch_rows = {("mlp", "pytorch"), ("gpt", "pytorch")}
    has_torch = "torch missing" not in out
    assert rows_of(out) == (expected | torch_rows if has_torch else expected)
    for op in ("add", "mul", "matmul", "relu", "sum", "reshape"):
        assert any(line.startswith(op + " ") for line in out.splitlines())
    result = json.loads(path.read_text())
    assert len(result["targets"]) == 3
    assert all(r["loss_rel_err"] <= 1e-4 for r in result["equivalence"])
    assert next(r["ms/step"] for r in result["steps"]
                if (r["case"], r["contender"]) == ("mlp", "scratchpar")) > 0
    lengths = result["lengths"]  # the LSTM's step against its sequence length
    assert [r["length"] for r in lengths] == [8, 16] and all(r["ms"] > 0 for r in lengths)
    for r in lengths:  # a step's tokens: 32 rows of its length
        assert r["us_per_token"] == pytest.approx(1e3 * r["ms"] / (32 * r["length"]))
    flat = (lengths[1]["ms"] / 16) / (lengths[0]["ms"] / 8)  # the longest's per token over the
    assert result["lengths_flatness"] == pytest.approx(flat)  # shortest's
    assert f"per token, T = 16 is {flat:.2f}x T = 8 (target <= 1.2: " in out
    memory = result["memory"]  # the training command's step: measured beside the estimate
    assert [r["model"] for r in memory] == ["gpt", "gpt, dropout 0.1", "lstm"]
    for r in memory:
        assert r["measured_mib"] > 0 and abs(r["error"]) < 0.5, r


def test_step_without_torch_keeps_scratchpar_and_the_floor(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now fails
    monkeypatch.delitem(sys.modules, "scratchpar.bench.twins", raising=False)
    monkeypatch.delattr(scratchpar.bench, "twins", raising=False)
    assert main(["step", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "torch missing" in out and "before timing: OK" in out
    assert rows_of(out) == {("mlp", "scratchpar"), ("mlp", "floor"), ("gpt", "scratchpar")}
    assert out.count("n/a (no torch)") == 2


def test_unknown_benchmark_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-benchmark"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'no-such-benchmark'" in capsys.readouterr().err


def test_disagreeing_contenders_are_not_timed():
    grads = {"w": np.ones(3)}

    def contender(name, loss, scale):
        return Contender(name, Timed(lambda: None, on_host),
                         lambda: (loss, {"w": scale * grads["w"]}))

    compare(Case("toy", "", [contender("a", 1.0, 1.0), contender("b", 1.0, 1.0 + 1e-6)]))
    with pytest.raises(NotEquivalent, match="b disagrees with a"):
        compare(Case("toy", "", [contender("a", 1.0, 1.0), contender("b", 1.0, 1.1)]))
    with pytest.raises(NotEquivalent):
        compare(Case("toy", "", [contender("a", 1.0, 1.0), contender("b", 1.01, 1.0)]))


def test_step_on_the_device_double_runs_every_contender_there(capsys, tmp_path):
    """The GPU path in CI: models, data and the floor on the double (CuPy's rules: no NumPy on
    device arrays), the equivalence check on host copies, the device in the header."""
    path = tmp_path / "step.json"
    assert main(["step", "--quick", "--device", "double", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("step benchmark on double (")
    assert "before timing: OK" in out and "ending with a wait for its device" in out
    has_torch = "torch missing" not in out
    torch_rows = {("mlp", "pytorch"), ("gpt", "pytorch")} if has_torch else set()
    assert rows_of(out) == {("mlp", "scratchpar"), ("mlp", "fused"), ("mlp", "floor"),
                            ("gpt", "scratchpar"), ("gpt", "fused")} | torch_rows
    result = json.loads(path.read_text())
    assert result["device"].startswith("double")
    assert len(result["equivalence"]) == 5 + len(torch_rows)
    assert all(r["loss_rel_err"] <= 1e-4 and r["grad_rel_err"] <= 1e-3
               for r in result["equivalence"])
    assert [t["target"] for t in result["targets"]] == [
        "mlp: scratchpar <= 1.30x pytorch", "gpt: scratchpar <= 1.30x pytorch",
        "mlp: fused <= 1.10x pytorch", "gpt: fused <= 1.00x pytorch"]
    assert {t["verdict"] for t in result["targets"]} == {
        "n/a (double)" if has_torch else "n/a (no torch)"}
