"""The note a node gets when its ranks share GPUs without MPS (backend.sharing_note)."""

import pytest

from scratchpar import backend


@pytest.fixture
def pipes(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("local_size, count", [(4, 1), (8, 2), (2, 1)])
def test_ranks_outnumbering_gpus_without_mps_are_told(pipes, local_size, count):
    note = backend.sharing_note(local_size, count)
    assert f"{local_size} ranks share {count} GPU" in note
    assert "nvidia-cuda-mps-control -d" in note


@pytest.mark.parametrize("local_size, count", [(1, 1), (4, 4), (2, 8)])
def test_a_gpu_per_rank_needs_no_note(pipes, local_size, count):
    assert backend.sharing_note(local_size, count) is None


def test_a_running_mps_daemon_silences_the_note(pipes):
    (pipes / "control").touch()  # the control daemon's pipe
    assert backend.sharing_note(4, 1) is None
    (pipes / "control").unlink()
    assert backend.sharing_note(4, 1) is not None


def test_the_default_pipe_directory_is_nvidias(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    seen = []
    monkeypatch.setattr(backend.os.path, "exists", lambda p: seen.append(p) or False)
    backend.sharing_note(2, 1)
    assert seen == ["/tmp/nvidia-mps/control"]
