"""The collectives picture is drawn from a benchmark JSON; a file not like one is a clear error."""

import json
import struct

import pytest

from scratchpar.bench.collectives.driver import human
from scratchpar.bench.collectives.plot import read_bench
from scratchpar.trace.__main__ import main

SIZES = [4096, 65536, 1048576]
ALGORITHMS = ["ring", "recursive_doubling", "tree", "auto", "mpi", "mpi-ring"]


def bench_json(tmp_path):
    """A JSON shaped like ``scratchpar.bench collectives --json``'s, with made-up times."""
    table = []
    for n in (2, 4):
        for size in SIZES:
            for k, name in enumerate(ALGORITHMS):
                us = (10 + k) * n + size / 1e3
                mpi_us = 14 * n + size / 1e3
                table.append({"n": n, "size": human(size), "algorithm": name, "us": us,
                              "algbw_gbs": size / us / 1e3,
                              "busbw_gbs": size / us / 1e3 * 2 * (n - 1) / n,
                              "x_mpi": us / mpi_us})
    path = tmp_path / "collectives.json"
    path.write_text(json.dumps({"world_sizes": [2, 4], "sizes": SIZES,
                                "memcpy": {"bytes": 1 << 26, "seconds": 0.01}, "table": table,
                                "fits": [], "crossovers": [], "targets": []}))
    return path, table


def test_rows_are_keyed_by_world_size_algorithm_and_bytes(tmp_path):
    path, table = bench_json(tmp_path)
    rows, sizes, memcpy_gbs = read_bench(path)
    assert sizes == SIZES and memcpy_gbs == pytest.approx((1 << 26) / 0.01 / 1e9)
    assert set(rows) == {(n, a) for n in (2, 4) for a in ALGORITHMS}
    assert rows[(4, "tree")][65536] == next(r for r in table if r["n"] == 4 and
                                            r["algorithm"] == "tree" and r["size"] == "64 KiB")


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path, _ = bench_json(tmp_path)
    out = tmp_path / "figs" / "collectives.png"
    assert main(["collectives", str(path), "-o", str(out)]) == 0
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (11 * 120, 7.5 * 120)  # figsize × dpi
    assert len(png) > 20_000
    assert str(out) in capsys.readouterr().out


@pytest.mark.parametrize("text", ["not json", '{"sizes": [4096]}'])
def test_a_file_that_is_not_a_benchmark_is_a_clear_error(tmp_path, capsys, text):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert main(["collectives", str(bad), "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"scratchpar.trace: {bad} is not a collectives benchmark JSON")
    assert "Traceback" not in err
    assert not (tmp_path / "x.png").exists()


def test_missing_benchmark_file_is_a_clear_error(tmp_path, capsys):
    assert main(["collectives", str(tmp_path / "absent.json")]) == 2
    assert "absent.json" in capsys.readouterr().err
