"""The run's progress on rank 0: a redrawn bar on a terminal, a plain line now and then in a log.

A bar redraws itself many times a second, which a terminal shows in place and a file keeps
every copy of (a 1,500-step run wrote 71 KB of them). Where standard error is not a terminal,
the run says where it is in one line per tenth of the run instead.
"""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

LINES = 10  # plain lines per run, without a terminal


class Progress:
    """``update()`` after each step (or each ``noun`` counted), ``show(loss, rate)`` at each
    metrics record, ``close()`` at the end; ``enabled`` False: silent."""

    def __init__(self, total: int, initial: int, enabled: bool, unit: str, stream=None,
                 noun: str = "step"):
        self.stream = stream or sys.stderr
        self.total, self.first, self.step, self.unit = total, initial, initial, unit
        self.bar, self.noun = None, noun
        self.enabled = enabled
        if enabled and self.stream.isatty():
            self.bar = tqdm(total=total, initial=initial, unit=noun, dynamic_ncols=True,
                            file=self.stream)
        self.every = max(1, (total - initial) // LINES)
        self.start, self.said = time.perf_counter(), ""

    def show(self, loss: float | None, rate: float) -> None:
        """The latest window's loss (None: its steps were skipped) and throughput."""
        shown = "skipped" if loss is None else f"{loss:.4f}"
        if self.bar is not None:
            self.bar.set_postfix(loss=shown, rate=f"{rate:.0f}")
        self.said = f" · loss {shown} · {rate:,.0f} {self.unit}/s"

    def update(self) -> None:
        self.step += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.enabled and (self.step % self.every == 0 or self.step == self.total):
            seconds = time.perf_counter() - self.start
            done = (self.step - self.first) / (self.total - self.first)
            left = f", about {seconds / done - seconds:.0f} s to go" if done < 1 else ""
            print(f"{self.noun} {self.step}/{self.total} ({100 * self.step / self.total:.0f}%)"
                  f"{self.said} · {seconds:.1f} s{left}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.enabled = False
