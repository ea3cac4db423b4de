"""Plain-text tables: text left, numbers right, missing values as -, columns by key."""

from scratchpar.table import printed, table


def test_columns_map_headers_to_keys_formats_and_functions():
    rows = [{"name": "ring", "ms": 1.5, "n": 2, "ok": True},
            {"name": "tree", "ms": None, "n": 16, "ok": False}]
    out = table("t", rows, {"algorithm": "name", "ms": "{ms:.3f}", "n²": lambda r: r["n"] ** 2,
                            "ok": "ok"})
    assert out.splitlines() == ["", "t",
                                "algorithm  ms      n²  ok",
                                "---------  -----  ---  --",
                                "ring       1.500    4  ✓",
                                "tree       -      256  ✗"]


def test_without_columns_every_key_of_the_first_row_is_a_column():
    rows = [{"ranks": 2, "contender": "dp", "ms/step": 3.0},
            {"ranks": 4, "contender": "zero-3", "ms/step": None}]
    assert table("t", rows) == table("t", rows, {k: k for k in rows[0]})
    assert table("t", rows).splitlines()[2] == "ranks  contender  ms/step"
    assert table("empty", []).splitlines() == ["", "empty", ""]


def test_formats_set_a_columns_decimals_and_keep_it_right_aligned():
    rows = [{"τ": 1, "final": 0.76612}, {"τ": 16, "final": 1.5}]
    assert table("t", rows, formats={"final": ".4f"}).splitlines()[2:] == [
        " τ   final", "--  ------", " 1  0.7661", "16  1.5000"]


def test_a_dict_shows_as_its_pairs():
    assert table("t", [{"histogram": {0: 8, 1: 10}}]).splitlines()[-1] == "0:8 1:10"


def test_printed_tables_are_those_with_rows_and_every_ones_rows_come_back(capsys):
    ring, empty = [{"n": 2, "ms": 1.5}], []
    assert printed({"ring": ("the ring", ring), "tree": ("the tree", empty)}) == {
        "ring": ring, "tree": empty}
    assert capsys.readouterr().out == table("the ring", ring) + "\n"
