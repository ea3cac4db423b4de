"""Ranks that share a node's GPUs (``scratchpar/mps.py``): MPS started by the node's first rank
before any rank initializes CUDA, the others waiting for its pipe; a note where it is off, or
cannot start; nothing where every rank has a GPU or MPS already runs."""

import pytest

from scratchpar import mps


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node whose MPS pipe lives in ``tmp_path``; ``started`` lists each start of the daemon,
    which makes the pipe when ``works``."""
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    monkeypatch.delenv("SCRATCHPAR_MPS", raising=False)
    monkeypatch.setattr(mps.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(mps, "WAIT", 0.2)
    state = type("Node", (), {"started": [], "works": True, "pipe": tmp_path / "control"})()

    def run(command, **_):
        state.started.append(command)
        if state.works:
            state.pipe.touch()

    monkeypatch.setattr(mps.subprocess, "run", run)
    return state


@pytest.mark.parametrize("local_size, count", [(4, 1), (8, 2), (2, 1)])
def test_the_first_rank_starts_mps_where_ranks_outnumber_gpus(node, local_size, count):
    said = mps.share(0, local_size, count)
    assert node.started == [["nvidia-cuda-mps-control", "-d"]]
    assert f"{local_size} ranks share {count} GPU" in said and "started NVIDIA's MPS" in said
    assert "echo quit | nvidia-cuda-mps-control" in said


def test_the_other_ranks_wait_for_the_pipe_and_start_nothing(node):
    assert mps.share(1, 4, 1) is None and node.started == []  # no pipe: waited WAIT, then on
    node.pipe.touch()
    assert mps.share(3, 4, 1) is None and node.started == []


@pytest.mark.parametrize("local_size, count", [(1, 1), (4, 4), (2, 8)])
def test_a_gpu_per_rank_needs_no_mps(node, local_size, count):
    assert mps.share(0, local_size, count) is None and node.started == []


def test_a_running_daemon_is_used_as_it_is(node):
    node.pipe.touch()
    assert mps.share(0, 4, 1) is None and node.started == []


def test_off_leaves_mps_alone_and_says_what_that_costs(node, monkeypatch):
    monkeypatch.setenv("SCRATCHPAR_MPS", "off")
    said = mps.share(0, 4, 1)
    assert node.started == [] and "without MPS" in said and "150 µs" in said
    assert mps.share(2, 4, 1) is None  # the first rank alone says it


def test_a_daemon_that_does_not_start_is_said(node):
    node.works = False
    said = mps.share(0, 4, 1)
    assert "without MPS" in said and "did not start it" in said


def test_no_daemon_on_the_machine_is_the_note(node, monkeypatch):
    monkeypatch.setattr(mps.shutil, "which", lambda name: None)
    assert "Start MPS first: nvidia-cuda-mps-control -d" in mps.share(0, 2, 1)
    assert node.started == []


def test_the_default_pipe_directory_is_nvidias(monkeypatch):
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    assert mps.pipe() == "/tmp/nvidia-mps/control"


def test_the_gpus_are_counted_without_cuda(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    assert mps.visible() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert mps.visible() == 0
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(mps.os, "listdir", lambda path: ["0000:01:00.0"] if "nvidia" in path
                        else [])
    assert mps.visible() == 1
