"""Workbook structure, injection safety, plan errors and atomic writes (no LibreOffice needed)."""

from __future__ import annotations

import openpyxl
import pytest
import sympy as sp
from concur.errors import UsageError
from concur.excel import writer as writer_mod
from concur.excel.cells import put_text, unit_format
from concur.excel.plan import (
    Derived,
    Input,
    PresetChoice,
    SheetVar,
    Sweep,
    WorkbookPlan,
)
from concur.excel.writer import write_workbook
from excel_plans import V, t1_plan

INJECTION = "=cmd|'/c calc'!A1"


@pytest.fixture(scope="module")
def t1_book(tmp_path_factory):
    path = tmp_path_factory.mktemp("xl") / "t1.xlsx"
    write_workbook(t1_plan(description_override=INJECTION), path)
    return path, openpyxl.load_workbook(path)


def _row_of(ws, name):
    for row in ws.iter_rows(min_col=1, max_col=1):
        if row[0].value == name:
            return row[0].row
    raise AssertionError(f"{name} not on {ws.title}")


def test_sheets_and_defined_names(t1_book):
    _, wb = t1_book
    assert wb.sheetnames == ["Inputs", "Catalogs", "Model", "Sweep tp", "Sweep context", "Scenarios", "Notes"]
    for name in ("users", "tp", "kv_pool", "model", "gpu", "gpu_memory"):
        assert name in wb.defined_names
    assert wb.defined_names["users"].attr_text == "Model!$B$8"
    assert wb.calculation.fullCalcOnLoad


def test_model_cells_are_formulas_over_defined_names(t1_book):
    _, wb = t1_book
    ws = wb["Model"]
    users = ws.cell(_row_of(ws, "users"), 2)
    assert users.data_type == "f"
    assert users.value.startswith("=_xlfn.FLOOR.MATH(ROUND(kv_tokens/context,")
    kv_pool = ws.cell(_row_of(ws, "kv_pool"), 2).value
    assert kv_pool == "=gpu_memory*mem_util-overhead-weights_per_gpu"  # GiB scales cancel
    assert ws.protection.sheet and users.protection.locked
    assert ws.cell(_row_of(ws, "kv_pool"), 2).number_format == '0.00" GiB"'
    assert ws.cell(_row_of(ws, "users"), 6).value == "users = ..."


def test_inputs_unlocked_validated_and_preset_driven(t1_book):
    _, wb = t1_book
    ws = wb["Inputs"]
    assert ws.protection.sheet
    tp = ws.cell(_row_of(ws, "tp"), 2)
    assert tp.value == 4 and not tp.protection.locked
    params = ws.cell(_row_of(ws, "params"), 2).value
    assert params.startswith("=INDEX(Catalogs!") and "MATCH(model," in params
    by_cell = {}
    for dv in ws.data_validations.dataValidation:
        for rng in dv.sqref.ranges:
            by_cell[rng.coord] = dv
    assert by_cell[tp.coordinate].type == "whole"
    assert by_cell[tp.coordinate].operator == "between"
    model_cell = ws.cell(_row_of(ws, "model"), 2)
    assert by_cell[model_cell.coordinate].type == "list"
    assert by_cell[model_cell.coordinate].formula1.startswith("Catalogs!")
    assert ws.cell(_row_of(ws, "mem_util"), 2).number_format in ("General", "0.00")


def test_injection_text_stays_text(t1_book):
    _, wb = t1_book
    ws = wb["Inputs"]
    cell = ws.cell(_row_of(ws, "overhead"), 4)
    assert cell.value == INJECTION
    assert cell.data_type == "s"


@pytest.mark.parametrize("text", ["=1+1", "+1+1", "-2+3", "@SUM(1)", "#N/A", "#DIV/0!", "\tx", "a\x00b"])
def test_put_text_never_makes_formulas_or_errors(tmp_path, text):
    wb = openpyxl.Workbook()
    put_text(wb.active, 1, 1, text)
    path = tmp_path / "t.xlsx"
    wb.save(path)
    cell = openpyxl.load_workbook(path).active["A1"]
    assert cell.data_type == "s"
    assert cell.value == text.replace("\x00", "\ufffd")


def test_sweep_sheet_has_row_formulas_and_a_chart(t1_book):
    _, wb = t1_book
    ws = wb["Sweep tp"]
    assert [ws.cell(r, 1).value for r in range(2, 7)] == [1, 2, 4, 8, 16]
    assert ws.cell(1, 2).value == "users [user]"
    assert "$A5" in "".join(str(ws.cell(5, c).value) for c in range(2, 9))
    assert len(ws._charts) == 1


def test_units_in_number_formats():
    assert unit_format("GiB", 79.18) == '0.00" GiB"'
    assert unit_format("user", 55, integer=True) == '#,##0" user"'
    assert unit_format("s", 0.00487) == 'General" s"'
    assert unit_format('we"ird', 5000) == '#,##0.0" weird"'
    assert unit_format("", 0.9) == "General"


def test_excel_misread_names_are_renamed_and_listed(tmp_path):
    cpu2 = SheetVar("cpu2", "", 1, "cores")
    true = SheetVar("TRUE", "", 1, "a flag")
    out = SheetVar("r", "", 1, "result")
    plan = WorkbookPlan("names", "", inputs=[Input(cpu2, 3), Input(true, 2)],
                        derived=[Derived(out, sp.Symbol("cpu2") * sp.Symbol("TRUE"), "r = cpu2*TRUE", "x:1", 6)])
    path = write_workbook(plan, tmp_path / "n.xlsx")
    wb = openpyxl.load_workbook(path)
    assert {"v_cpu2", "v_TRUE", "v_r"} <= set(wb.defined_names)
    assert "cpu2" not in wb.defined_names
    assert wb["Model"]["B2"].value == "=v_TRUE*v_cpu2"
    notes = [c.value for c in wb["Notes"]["A"]]
    assert "cpu2" in notes and "TRUE" in notes


def _small_plan(expr, **kw):
    a = SheetVar("a", "", 1, "a")
    return WorkbookPlan("p", "", inputs=[Input(a, 1.0)],
                        derived=[Derived(SheetVar("b", "", 1, "b"), expr, "b = ...", "pack.yaml:7", 1.0)], **kw)


def test_unknown_symbol_names_the_equation_location(tmp_path):
    with pytest.raises(UsageError, match=r"pack.yaml:7.*'ghost'"):
        write_workbook(_small_plan(sp.Symbol("ghost") + sp.Symbol("a")), tmp_path / "x.xlsx")
    assert not (tmp_path / "x.xlsx").exists()


def test_bad_sweep_and_plan_values_are_refused(tmp_path):
    bad_sweep = Sweep("s", "nope", (1.0,), ("b",), "x", "y", "t")
    with pytest.raises(UsageError, match="not an input"):
        write_workbook(_small_plan(sp.Symbol("a"), sweeps=[bad_sweep]), tmp_path / "s.xlsx")
    with pytest.raises(UsageError, match="scale"):
        SheetVar("m", "GiB", 0, "zero scale")
    with pytest.raises(UsageError, match="not in catalog"):
        PresetChoice("gpu", "gpus", "tpu", ("h100",), {})
    dup = WorkbookPlan("d", "", inputs=[Input(V["tp"], 1), Input(V["tp"], 2)])
    with pytest.raises(UsageError, match="twice"):
        write_workbook(dup, tmp_path / "d.xlsx")


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "book.xlsx"
    target.write_bytes(b"previous contents")

    def boom(self, filename):
        with open(filename, "wb") as fh:
            fh.write(b"half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(writer_mod.Workbook, "save", boom)
    with pytest.raises(OSError, match="disk full"):
        write_workbook(t1_plan(), target)
    assert target.read_bytes() == b"previous contents"
    assert [p.name for p in tmp_path.iterdir()] == ["book.xlsx"]


def test_implicit_block_gets_value_residual_and_goal_seek_note(tmp_path):
    x = SheetVar("x", "", 1, "root of x**2 = a")
    a = sp.Symbol("a")
    xs = sp.Symbol("x")
    plan = WorkbookPlan("imp", "", inputs=[Input(SheetVar("a", "", 1, "a"), 2.0)],
                        derived=[Derived(x, None, "x**2 = a", "p.yaml:3", 2**0.5, implicit=True,
                                         residual=xs**2 - a)])
    wb = openpyxl.load_workbook(write_workbook(plan, tmp_path / "i.xlsx"))
    ws = wb["Model"]
    assert ws["B2"].value == pytest.approx(2**0.5) and not ws["B2"].protection.locked
    assert ws["H2"].value == "=POWER(x,2)-a" or ws["H2"].value == "=(-a)+POWER(x,2)"
    assert "Goal Seek" in ws["I2"].value
