"""Workbook structure, looks, injection safety, plan errors and atomic writes (no LibreOffice needed)."""

from __future__ import annotations

import openpyxl
import pytest
import sympy as sp
from excel_plans import GIB, V, t1_plan

from concur.errors import UsageError
from concur.excel import style
from concur.excel.cells import put_text
from concur.excel.plan import (
    Derived,
    Input,
    PresetChoice,
    SheetVar,
    Sweep,
    WorkbookPlan,
)
from concur.excel.writer import write_workbook

INJECTION = "=cmd|'/c calc'!A1"


@pytest.fixture(scope="module")
def t1_book(tmp_path_factory):
    path = tmp_path_factory.mktemp("xl") / "t1.xlsx"
    write_workbook(t1_plan(description_override=INJECTION), path)
    return path, openpyxl.load_workbook(path)


def _row_of(ws, name, first=1):
    for row in ws.iter_rows(min_col=1, max_col=1, min_row=first):
        if row[0].value == name:
            return row[0].row
    raise AssertionError(f"{name} not on {ws.title}")


def _input_row(ws, name):
    """The row of ``name`` in the Inputs table (below the summary, which may repeat a name)."""
    return _row_of(ws, name, first=_row_of(ws, "Name") + 1)


def test_sheets_and_defined_names(t1_book):
    _, wb = t1_book
    assert wb.sheetnames == [
        "Inputs",
        "Model",
        "Sweep tp",
        "Sweep context",
        "Scenarios",
        "Catalogs",
        "Sources",
        "Notes",
    ]
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
    assert ws.cell(_row_of(ws, "kv_pool"), 2).number_format == "#,##0.00"  # the unit is in its own column
    assert ws.cell(_row_of(ws, "kv_pool"), 3).value == "GiB"
    assert ws.cell(_row_of(ws, "users"), 4).value == "users = ..."
    assert ws.cell(_row_of(ws, "users"), 5).value.startswith("formulas/llm_memory.yaml:")


def test_inputs_unlocked_validated_and_preset_driven(t1_book):
    _, wb = t1_book
    ws = wb["Inputs"]
    assert ws.protection.sheet
    tp = ws.cell(_input_row(ws, "tp"), 2)
    assert tp.value == 4 and not tp.protection.locked
    params = ws.cell(_input_row(ws, "params"), 2).value
    assert params.startswith("=INDEX(Catalogs!") and "MATCH(model," in params
    by_cell = {}
    for dv in ws.data_validations.dataValidation:
        for rng in dv.sqref.ranges:
            by_cell[rng.coord] = dv
    assert by_cell[tp.coordinate].type == "whole"
    assert by_cell[tp.coordinate].operator == "between"
    model_cell = ws.cell(_input_row(ws, "model"), 2)
    assert by_cell[model_cell.coordinate].type == "list"
    assert by_cell[model_cell.coordinate].formula1.startswith("Catalogs!")
    assert ws.cell(_input_row(ws, "mem_util"), 2).number_format == "0.0##%"  # a fraction in [0, 1]


def test_inputs_have_a_style_of_their_own_and_a_legend(t1_book):
    _, wb = t1_book
    ws = wb["Inputs"]
    typed, looked_up = ws.cell(_input_row(ws, "tp"), 2), ws.cell(_input_row(ws, "params"), 2)
    computed = wb["Model"].cell(_row_of(wb["Model"], "users"), 2)
    for cell in (typed, looked_up):
        assert cell.fill.fgColor.rgb.endswith("FFF2CC")
    assert typed.font.color.rgb.endswith("0000FF") and looked_up.font.color.rgb.endswith("00803C")
    assert computed.fill.fill_type is None and computed.font.color.type == "theme"  # plain text colour
    legend = _row_of(ws, "Legend")
    assert ws.cell(legend, 2).fill.fgColor.rgb == typed.fill.fgColor.rgb
    assert "input" in ws.cell(legend, 2).value and "catalog" in ws.cell(legend, 3).value


def test_summary_block_shows_the_answer_and_a_live_scenario_line(t1_book):
    _, wb = t1_book
    ws = wb["Inputs"]
    assert ws["A1"].value == "T1 KV cache -> users" and ws["A1"].font.sz >= 14
    line = ws["A2"].value
    assert line.startswith('="model "&model') and 'TEXT(tp,"#,##0")' in line and "TEXT(context," in line
    answer = ws.cell(_row_of(ws, "users"), 2)  # the summary comes before the input table
    assert answer.row < _row_of(ws, "Name")
    assert answer.value == "=users" and answer.font.sz >= 14 and answer.font.b


def test_number_formats_follow_the_unit():
    def fmt(unit, value, typed=False, **kw):
        return style.number_format(SheetVar("x", unit, 1, "", **kw), value, typed)

    assert fmt("user", 55, integer=True) == "#,##0"
    assert fmt("token/user", 1024.0) == "#,##0"  # a count shows no decimals
    assert fmt("usd/month", 87600.0) == "$#,##0" and fmt("usd", 3.16) == "$#,##0.00"
    assert fmt("", 0.2091028265988366, bounds=(0, 1)) == "0.0%"
    assert fmt("GiB", 79.18) == "#,##0.00" and fmt("GiB", 4.0, typed=True) == "#,##0.0###"
    assert fmt("s", 0.00487) == "0.000##" and fmt("s", 2e-6) == "0.00E+00"
    assert style.shown(87600.0, "$#,##0") == "$87,600" and style.shown(0.2091, "0.0%") == "20.9%"
    assert style.shown(4.5, "#,##0.0###") == "4.5" and style.shown(4.0, "#,##0.0###") == "4.0"
    assert '"' not in fmt('we"ird', 5000)  # formats are quote-free: TEXT(x,"...") reuses them


def test_pages_are_readable_sizes(t1_book):
    _, wb = t1_book
    for ws in wb.worksheets:
        assert ws.print_area, ws.title
        assert not ws.sheet_properties.pageSetUpPr.fitToPage, ws.title
        assert ws.page_setup.scale >= style.MIN_SCALE, ws.title


def test_injection_text_stays_text(t1_book):
    _, wb = t1_book
    ws = wb["Inputs"]
    cell = ws.cell(_input_row(ws, "overhead"), 4)
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


def test_a_title_with_control_characters_leaves_a_readable_workbook(tmp_path):
    """``--title $'a\\x01b'`` went raw into docProps/core.xml: exit 0 and a file no reader opens."""
    from dataclasses import replace

    path = tmp_path / "t.xlsx"
    write_workbook(replace(t1_plan(), title="a\x01b\x1bc"), path)
    wb = openpyxl.load_workbook(path)
    assert wb.properties.title == "a\ufffdb\ufffdc" and wb["Inputs"]["A1"].value == "a\ufffdb\ufffdc"


def test_sweep_sheet_has_row_formulas_and_a_chart(t1_book):
    _, wb = t1_book
    ws = wb["Sweep tp"]
    head = _row_of(ws, "tp [gpu]")
    assert [ws.cell(r, 1).value for r in range(head + 1, head + 6)] == [1, 2, 4, 8, 16]
    assert ws.cell(head, 2).value == "users [user]"
    assert "$A" in "".join(str(ws.cell(head + 4, c).value) for c in range(2, 9))
    assert len(ws._charts) == 1


def test_sweep_point_outside_bounds_says_does_not_fit(tmp_path):
    a = SheetVar("a", "GiB", GIB, "memory")
    left = SheetVar("left", "GiB", GIB, "memory left", bounds=(0, None))
    users = SheetVar("users", "user", 1, "users", integer=True)
    plan = WorkbookPlan(
        "fit",
        "",
        inputs=[Input(a, 10)],
        derived=[
            Derived(left, sp.Symbol("a") - 4 * GIB, "left = a - 4 GiB", "p:1", 6),
            Derived(users, sp.floor(sp.Symbol("left") / GIB), "users = ...", "p:2", 6),
        ],
        sweeps=[Sweep("a", "a", (2, 10), ("users",), "a", "users", "t")],
    )
    ws = openpyxl.load_workbook(write_workbook(plan, tmp_path / "f.xlsx"))["Sweep a"]
    row = _row_of(ws, "a [GiB]") + 1
    assert ws.cell(row, 3).value == f'=IF($A{row}-4<0,"does not fit",$A{row}-4)'
    users_cell = ws.cell(row, 2).value
    assert users_cell.startswith(f"=IF(ISNUMBER(C{row}),") and users_cell.endswith(',"does not fit")')
    charted = [c.value for c in ws[row] if isinstance(c.value, str) and "NA()" in c.value]
    assert charted == [f"=IF(ISNUMBER(B{row}),B{row},NA())"]


def test_excel_misread_names_are_renamed_and_listed(tmp_path):
    cpu2 = SheetVar("cpu2", "", 1, "cores")
    true = SheetVar("TRUE", "", 1, "a flag")
    out = SheetVar("r", "", 1, "result")
    plan = WorkbookPlan(
        "names",
        "",
        inputs=[Input(cpu2, 3), Input(true, 2)],
        derived=[Derived(out, sp.Symbol("cpu2") * sp.Symbol("TRUE"), "r = cpu2*TRUE", "x:1", 6)],
    )
    path = write_workbook(plan, tmp_path / "n.xlsx")
    wb = openpyxl.load_workbook(path)
    assert {"v_cpu2", "v_TRUE", "v_r"} <= set(wb.defined_names)
    assert "cpu2" not in wb.defined_names
    assert wb["Model"]["B2"].value == "=v_TRUE*v_cpu2"
    notes = [c.value for c in wb["Notes"]["A"]]
    assert "cpu2" in notes and "TRUE" in notes


def _small_plan(expr, **kw):
    a = SheetVar("a", "", 1, "a")
    return WorkbookPlan(
        "p",
        "",
        inputs=[Input(a, 1.0)],
        derived=[Derived(SheetVar("b", "", 1, "b"), expr, "b = ...", "pack.yaml:7", 1.0)],
        **kw,
    )


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

    from openpyxl.writer.excel import ExcelWriter  # what save_atomically saves through

    def boom(self):
        self._archive.writestr("xl/half.xml", b"half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(ExcelWriter, "save", boom)
    with pytest.raises(OSError, match="disk full"):
        write_workbook(t1_plan(), target)
    assert target.read_bytes() == b"previous contents"
    assert [p.name for p in tmp_path.iterdir()] == ["book.xlsx"]


def test_implicit_block_gets_value_residual_and_goal_seek_note(tmp_path):
    x = SheetVar("x", "", 1, "root of x**2 = a")
    a = sp.Symbol("a")
    xs = sp.Symbol("x")
    plan = WorkbookPlan(
        "imp",
        "",
        inputs=[Input(SheetVar("a", "", 1, "a"), 2.0)],
        derived=[Derived(x, None, "x**2 = a", "p.yaml:3", 2**0.5, implicit=True, residual=xs**2 - a)],
    )
    wb = openpyxl.load_workbook(write_workbook(plan, tmp_path / "i.xlsx"))
    ws = wb["Model"]
    assert ws["B2"].value == pytest.approx(2**0.5) and not ws["B2"].protection.locked
    assert ws["H2"].value == "=POWER(x,2)-a"
    assert "Goal Seek" in ws["I2"].value
