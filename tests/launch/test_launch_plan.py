"""``mpiexec -n 2 python -m scratchpar.plan calibrate``: the ranks measure messages, a
reduction, compute and memory, and rank 0 writes a profile that loads; a calibration that
cannot measure a message says why."""

import subprocess
import sys

from launch_helpers import ROOT, run_mpi

from scratchpar.plan.profile import load


def test_two_ranks_calibrate_this_machine_into_a_profile(tmp_path):
    out = tmp_path / "cluster.toml"
    done = run_mpi(2, ["-m", "scratchpar.plan", "calibrate", "--quick", "--out", str(out)],
                   timeout=120)
    assert done.returncode == 0, done.stderr
    profile = load(out)
    assert profile.ranks_per_node == 2 and profile.network is None  # one node here
    assert 1e-7 < profile.node.alpha_s < 1e-3 and 1e-12 < profile.node.beta_s_per_byte < 1e-8
    assert profile.device.flops > 1e8 and profile.device.memory_bytes > 2**28
    assert 1e-8 < profile.engine.array_s < 1e-3  # AdamW's Python ops on one small array
    kernels = profile.kernels  # this engine's, fitted on a sweep of products
    assert kernels.kind == "engine" and 0 < kernels.efficiency <= 1 and kernels.half_size >= 0
    assert 1e-8 < kernels.launch_s < 1e-3  # an autograd op's Python, each way
    for line in ("node     rank 0 ↔ rank 1: α", "network  not measured", "reduce   a += b: γ",
                 "compute  256×256 matrix product",
                 "kernels  engine: η", "AdamW's step over 192 small arrays",
                 f"written: {out}"):
        assert line in done.stdout, done.stdout
    assert done.stdout.count("written:") == 1  # rank 0 alone reports


def test_a_calibration_without_two_ranks_says_how_to_run_it(tmp_path):
    alone = subprocess.run([sys.executable, "-m", "scratchpar.plan", "calibrate"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60,
                           env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert alone.returncode == 2 and "run it under mpiexec" in alone.stderr
    one = run_mpi(1, ["-m", "scratchpar.plan", "calibrate"], timeout=60)
    assert one.returncode == 2 and "needs at least 2 ranks" in one.stderr
    assert not (tmp_path / "cluster.toml").exists()
