"""The committed workbooks/*.xlsx are up to date with their definitions.

Each definition is exported again into a temporary directory and compared with
the committed file cell by cell (formula text or value, every sheet) and name by
name: not byte by byte, since the compressed bytes depend on the zlib and openpyxl
versions (exports are byte-identical on one machine: tests/excel/test_export.py). A failure
means: run ``concur export workbooks/NAME.yaml`` and commit the result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

openpyxl = pytest.importorskip("openpyxl")

from concur.excel.definition import export_definition, load_definition  # noqa: E402
from concur.lang.check import check_paths  # noqa: E402

WORKBOOKS = Path(__file__).resolve().parents[2] / "workbooks"
DEFINITIONS = sorted(WORKBOOKS.glob("*.yaml"))


def _cells(path: Path) -> tuple[dict[str, dict[str, object]], dict[str, str]]:
    wb = openpyxl.load_workbook(path)
    sheets = {}
    for ws in wb.worksheets:
        sheets[ws.title] = {c.coordinate: c.value for row in ws.iter_rows() for c in row if c.value is not None}
    names = {n: d.attr_text for n, d in wb.defined_names.items()}
    return sheets, names


def test_there_are_standard_workbooks() -> None:
    stems = {p.stem for p in DEFINITIONS}
    assert {"llm_capacity", "data_loader", "rate_limit", "staffing", "llm_fleet"} <= stems


def test_glue_packs_are_unit_consistent() -> None:
    diags, count = check_paths([str(WORKBOOKS / "packs")])
    assert count >= 1
    assert [str(d) for d in diags] == []


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda p: p.stem)
def test_committed_workbook_is_current(definition: Path, tmp_path: Path) -> None:
    committed = definition.with_suffix(".xlsx")
    assert committed.is_file(), f"{committed.name} missing: run concur export workbooks/{definition.name}"
    fresh = export_definition(definition, tmp_path / committed.name)
    old_sheets, old_names = _cells(committed)
    new_sheets, new_names = _cells(fresh)
    assert list(old_sheets) == list(new_sheets), f"stale {committed.name}: sheets differ"
    for title, cells in new_sheets.items():
        old = old_sheets[title]
        diff = sorted(set(old) ^ set(cells)) + sorted(k for k in cells if k in old and old[k] != cells[k])
        assert not diff, (
            f"stale {committed.name}: sheet {title} differs at {diff[:5]}; "
            f"run concur export workbooks/{definition.name}"
        )
    assert old_names == new_names, f"stale {committed.name}: defined names differ"


def test_definition_errors_name_the_file(tmp_path: Path) -> None:
    from concur.errors import UsageError

    bad = tmp_path / "bad.yaml"
    bad.write_text("title: x\npacks: [data_loader]\nfind: [throughput]\nsheets: 3\n")
    with pytest.raises(UsageError, match=r"bad\.yaml.*unknown key 'sheets'"):
        load_definition(bad)
