"""Units: the shipped table equals pint's answers, covers the shipped packs, and the pitfalls are refused."""

from __future__ import annotations

import json

import pytest

from concur.errors import UnitError
from concur.lang import unit_table, units


def test_shipped_table_agrees_with_pint():
    table = json.loads(units.SHIPPED_TABLE.read_text())
    for text, (factor, dims) in table.items():
        fresh = units.parse_with_pint(text)
        assert fresh.factor == pytest.approx(factor, rel=1e-15), text
        assert [list(d) for d in fresh.dims] == dims, text


def test_shipped_table_covers_every_unit_in_the_shipped_packs():
    table = json.loads(units.SHIPPED_TABLE.read_text())
    missing = sorted(set(unit_table.shipped_unit_texts()) - set(table))
    assert not missing, f"regenerate with: python -m concur.lang.unit_table  (missing {missing})"


@pytest.mark.parametrize("text, hint", [("KB", "KiB"), ("Gb", "Gbit"), ("b", "barn"), ("pct", "percent")])
def test_ambiguous_spellings_are_refused(text, hint):
    with pytest.raises(UnitError, match=hint):
        units.unit_info(text)


def test_bytes_and_time_do_not_mix():
    assert units.unit_info("GiB").dims != units.unit_info("s").dims
    assert units.unit_info("GiB").factor == 8 * 2**30
    assert units.unit_info("GB").factor == 8 * 10**9


@pytest.mark.parametrize(
    "text, number, unit",
    [("8k token", 8000, "token"), ("4 GiB", 4, "GiB"), ("0.9", 0.9, ""), ("1_000 request/s", 1000, "request/s")],
)
def test_parse_quantity(text, number, unit):
    got, info = units.parse_quantity(text)
    assert got == number and info.text == unit
