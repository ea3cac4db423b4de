"""Progress: a redrawn bar on a terminal, a plain line per tenth of the run in a log, nothing
when switched off."""

import io

from scratchpar.train.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(stream, enabled=True, total=50, initial=0) -> str:
    progress = Progress(total, initial, enabled, "tok", stream)
    for step in range(initial + 1, total + 1):
        if step % 5 == 0:
            progress.show(None if step == 25 else 1.0 / step, 1000.0 * step)
        progress.update()
    progress.close()
    return stream.getvalue()


def test_a_terminal_gets_the_redrawn_bar():
    out = run(Terminal())
    assert out.count("\r") > 10 and "50/50" in out and "loss=0.0200" in out


def test_a_log_gets_a_line_per_tenth_of_the_run_with_the_latest_loss():
    lines = run(io.StringIO()).splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"step {5 * k}/50" for k in range(1, 11)]
    assert "· loss skipped · 25,000 tok/s ·" in lines[4]
    assert "· loss 0.0200 · 50,000 tok/s ·" in lines[-1] and "to go" not in lines[-1]


def test_a_resumed_run_counts_its_tenths_from_where_it_resumed():
    lines = run(io.StringIO(), total=50, initial=30).splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"step {32 + 2 * k}/50" for k in range(10)]


def test_switched_off_it_says_nothing():
    assert run(io.StringIO(), enabled=False) == run(Terminal(), enabled=False) == ""
