"""draw_figures: a benchmark's figures drawn, or a line saying why not."""

import importlib.util

from scratchpar.jobs.harness import draw_figures


def test_figures_are_drawn_into_the_directory_and_listed(capsys):
    calls = []
    got = draw_figures("out", lambda d, *a: calls.append((d, a)) or [f"{d}/a.png"], 1, 2)
    assert got == ["out/a.png"] and calls == [("out", (1, 2))]
    assert "figures: out/a.png" in capsys.readouterr().out


def test_no_directory_draws_nothing_and_says_nothing(capsys):
    assert draw_figures(None, lambda d: ["x"]) == []
    assert capsys.readouterr().out == ""


def test_without_matplotlib_the_line_says_what_is_still_written(capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert draw_figures("out", lambda d: ["never"], without="; traces only") == []
    assert "matplotlib missing (pip install 'scratchpar[plot]'); traces only" in \
        capsys.readouterr().out
