"""A save's two renames are not cut by Ctrl-C: an interrupt that comes between them is held
and raised once the new checkpoint is in place."""

import os
import signal
import threading
import time

import pytest

from scratchpar.train import checkpoint, load_checkpoint, save_checkpoint


@pytest.fixture
def other_thread():
    """A thread that does not mask SIGINT, as MPI's own threads: the system may hand it the
    signal, and Python then raises it in the main thread all the same."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join()


def test_an_interrupt_inside_the_block_is_raised_after_it(other_thread):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with checkpoint._deferred(signal.SIGINT):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs here, if it is going to
            done.append("the block ran on")
    assert done == ["the block ran on"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_interrupt_between_the_renames_leaves_the_new_checkpoint(tmp_path, monkeypatch,
                                                                   other_thread):
    save_checkpoint(tmp_path / "ck", {"model": {}}, {"step": 1})
    rename = type(tmp_path).rename

    def interrupted(self, target):  # Ctrl-C after the old checkpoint moved aside
        moved = rename(self, target)
        if ".old-" in str(target):
            os.kill(os.getpid(), signal.SIGINT)
        return moved

    monkeypatch.setattr(type(tmp_path), "rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path / "ck", {"model": {}}, {"step": 2})
    monkeypatch.undo()
    assert load_checkpoint(tmp_path / "ck")[1]["step"] == 2
