from __future__ import annotations

import pytest

from concur.excel.names import MAX_NAME_LENGTH, is_valid_name, mangle, mangle_all


@pytest.mark.parametrize("name", ["users", "tp", "kv_per_token", "gpu_memory", "xfe1", "abcd1", "_x", "kv.x"])
def test_valid_names_are_kept_exactly(name):
    assert is_valid_name(name)
    assert mangle(name) == name


@pytest.mark.parametrize(
    "name, safe",
    [
        ("cpu2", "v_cpu2"),  # cell A1-style reference CPU2
        ("Q1", "v_Q1"),
        ("xfd1048576", "v_xfd1048576"),  # last cell of a sheet
        ("TRUE", "v_TRUE"),
        ("false", "v_false"),
        ("r", "v_r"),  # R1C1: the current row
        ("c", "v_c"),
        ("rc", "v_rc"),
        ("R1C1", "v_R1C1"),
        ("r[2]c", "v_r_2_c"),
        ("2fast", "v_2fast"),
        ("has space", "v_has_space"),
    ],
)
def test_names_excel_would_misread_are_renamed(name, safe):
    assert not is_valid_name(name)
    assert mangle(name) == safe
    assert is_valid_name(safe)


def test_cell_like_beyond_the_grid_is_a_name():
    # column XFE and row 1048577 are past the last cell, so these are ordinary names
    assert is_valid_name("xfe1")
    assert is_valid_name("a1048577")


def test_long_names_are_cut_to_the_limit():
    long = "a" * 300
    safe = mangle(long)
    assert len(safe) == MAX_NAME_LENGTH and is_valid_name(safe)


def test_mangle_all_is_deterministic_and_unique_case_insensitively():
    names = ["users", "cpu2", "v_cpu2", "TRUE", "r", "V_R"]
    first = mangle_all(names)
    assert first == mangle_all(list(names))
    assert first["users"] == "users"
    assert first["v_cpu2"] == "v_cpu2"  # a valid name keeps itself ...
    assert first["cpu2"] == "v_cpu2_2"  # ... and the renamed one steps aside
    assert first["V_R"] == "V_R" and first["r"] == "v_r_2"
    assert len({v.upper() for v in first.values()}) == len(names)
    assert all(is_valid_name(v) for v in first.values())
