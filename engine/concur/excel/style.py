"""How a concur workbook looks: number formats per unit, the input style, column widths, printing.

How is this designed, and why?
------------------------------
A workbook handed to finance is read on paper (or as a PDF) before anyone types into it, so
the numbers must read like a finance sheet: ``$87,600`` not ``87,600.0 usd/month``, ``20.9%``
not ``0.2091028265988366``, ``1,024`` tokens not ``1,024.0``. The unit lives in its own column
(or the column header) and never in the number format, so it is printed once, and every number
format here is quote-free: the summary line can reuse it inside ``TEXT(x,"...")``.

:func:`value_kind` sorts a variable into one of five kinds, and :func:`number_format` gives the
format for a value of that kind:

=========  ===========================================  ===============================
kind       what                                         formats
=========  ===========================================  ===============================
currency   the unit has the ``[currency]`` dimension    ``$#,##0`` from 1,000, else ``$#,##0.00``
fraction   dimensionless, bounds inside [0, 1]          ``0.0%`` (inputs ``0.0##%``)
integer    an integer variable                          ``#,##0``
count      a unit made only of counts (token/user)      ``#,##0`` for whole values
measure    everything else (GiB, s, token/s)            about 4 significant digits
=========  ===========================================  ===============================

A *computed* cell shows about four significant digits of the value the engine found (its
format is chosen from that value); an *input* cell shows what was typed, exactly, with at
least one decimal for a measure (``#,##0.0###``), so typing 4.5 GiB over 4 GiB never shows
``5``. Worked example: ``gpu_memory`` 79.18 GiB (input) shows ``79.18``; ``kv_pool`` 34.41 GiB
(computed) ``34.41``; ``cost_per_month`` $87,600; ``p_wait`` 0.2091 ``20.9%``.

Widths: :func:`shown` renders a value the way a format shows it (closely enough to size a
column), and :func:`fit_width` turns the longest text of a column into a column width with
room for letters wider than digits (a width unit is one digit of the default font, in
LibreOffice of the font it substitutes for Calibri), so no cell prints as ``###``.

Printing: :func:`page_setup` gives every sheet landscape pages with narrow margins, a print area,
header rows repeated on every page, and a fixed scale no smaller than 75 % (text is wrapped in
bounded columns rather than shrunk to fit).

Alerts: a cell that must read ``ok`` (the range check of a searched answer; ``in range``
beside the answer) turns red with white bold text when it reads anything else
(:func:`alert_unless_ok`, one conditional format).

Non-goals: themes, locale-specific currency symbols.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.utils import get_column_letter

from ..compiled import table
from ..errors import ConcurError
from ..lang.units import COUNT_DIMENSIONS, unit_info
from .plan import SheetVar

__all__ = [
    "BOLD",
    "COMPUTED_FILL",
    "HEADER_FILL",
    "INPUT_FILL",
    "INPUT_FONT",
    "LOOKUP_FONT",
    "TITLE_FONT",
    "WRAP",
    "alert_unless_ok",
    "fit_width",
    "line_height",
    "number_format",
    "page_setup",
    "shown",
    "style_header",
    "value_kind",
    "wrapped_lines",
]

FONT_NAME = "Calibri"  # the workbook default; a font without a name falls back to a serif in LibreOffice
BOLD = Font(name=FONT_NAME, size=11, bold=True)
TITLE_FONT = Font(name=FONT_NAME, bold=True, size=16)
BIG_FONT = Font(name=FONT_NAME, bold=True, size=16, color="1F3864")
NOTE_FONT = Font(name=FONT_NAME, size=11, italic=True, color="595959")
INPUT_FONT = Font(name=FONT_NAME, size=11, color="0000FF")  # blue: a number someone typed (finance convention)
LOOKUP_FONT = Font(name=FONT_NAME, size=11, color="00803C")  # green: looked up from the Catalogs sheet
INPUT_FILL = PatternFill("solid", start_color="FFF2CC")
COMPUTED_FILL = PatternFill("solid", start_color="F2F2F2")
RESULT_FILL = PatternFill("solid", start_color="DDEBF7")
HEADER_FILL = PatternFill("solid", start_color="D9D9D9")
WRAP = Alignment(wrap_text=True, vertical="top")
TOP = Alignment(vertical="top")
MIDDLE = Alignment(vertical="center")
MIDDLE_WRAP = Alignment(wrap_text=True, vertical="center")
_THIN = Side(style="thin", color="BFBFBF")
BOX = Border(left=_THIN, right=_THIN, top=_THIN, bottom=_THIN)

# A width unit is one digit of the default font (LibreOffice measures it in the font it substitutes
# for Calibri); letters and bold text run up to ~10 % wider than digits.
_FONT_SLACK = 1.1
# Width units the printable part of a landscape Letter page holds at 100 % (A4 is wider), measured
# in LibreOffice with DejaVu Sans standing in for Calibri (0.096 in per unit), with a little spare.
PAGE_WIDTH = 98.0
MIN_SCALE = 75


_MISS = object()  # a unit not judged yet (None is a judgement: not a unit)


def _dims(unit: str) -> tuple[tuple[str, float], ...] | None:
    """The unit's dimensions, or None when the text is not a unit concur knows (each text judged
    once per process: the process table "unit dims" of :mod:`concur.compiled`)."""
    known = table("unit dims", 512)
    hit = known.get(unit, _MISS)
    if hit is not _MISS:
        dims: tuple[tuple[str, float], ...] | None = hit
        return dims
    dims = _unit_dims(unit)
    known.put(unit, dims)
    return dims


def _unit_dims(unit: str) -> tuple[tuple[str, float], ...] | None:
    try:
        return unit_info(unit).dims
    except (ConcurError, ValueError):
        return None


def value_kind(var: SheetVar) -> str:
    """``currency``, ``fraction``, ``integer``, ``count`` or ``measure`` (see the module table)."""
    if var.integer:
        return "integer"
    dims = _dims(var.unit.strip()) if var.unit.strip() else ()
    if dims is None:
        return "measure"
    names = {d for d, _ in dims}
    if "[currency]" in names:
        return "currency"
    if not dims:
        lo, hi = var.bounds
        if lo is not None and hi is not None and lo >= 0 and hi <= 1:
            return "fraction"
        return "count"
    if names <= COUNT_DIMENSIONS:
        return "count"
    return "measure"


def _whole(value: float) -> bool:
    return math.isfinite(value) and abs(value - round(value)) <= 1e-9 * max(1.0, abs(value))


def number_format(var: SheetVar, value: Any, typed: bool = False) -> str:
    """The number format for ``value`` of ``var`` (``typed``: an input cell, shown exactly)."""
    if var.choices or not isinstance(value, (int, float)) or isinstance(value, bool):
        return "General"
    v = float(value)
    a = abs(v)
    kind = value_kind(var)
    if kind == "integer" or (kind == "count" and _whole(v)):
        return "#,##0"
    if kind == "currency":
        if a >= 1000:
            return "$#,##0"
        return "$#,##0.00" if a >= 0.01 or a == 0 else "$0.000000"
    if kind == "fraction":
        if typed:
            return "0.0##%"
        return "0.0%" if a >= 0.01 or a == 0 else "0.000%"
    if a != 0 and a < 0.001:
        return "0.00E+00"
    if typed:
        return "#,##0.0###"
    if a >= 1000:
        return "#,##0"
    if a >= 100:
        return "#,##0.0"
    if a >= 1 or a == 0:
        return "#,##0.00"
    return "0.000##"


def shown(value: Any, fmt: str) -> str:
    """``value`` as ``fmt`` displays it (the formats :func:`number_format` makes; text as is)."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return "" if value is None else str(value)
    v = float(value)
    if "E+" in fmt:
        return f"{v:.2E}"
    body = fmt.replace("$", "").replace("%", "")
    if "%" in fmt:
        v *= 100
    decimals = len(body.split(".")[1]) if "." in body else 0
    text = f"{v:,.{decimals}f}" if "," in body else f"{v:.{decimals}f}"
    if "#" in body.split(".")[-1] and "." in body:  # optional digits: trailing zeros go
        mandatory = body.split(".")[1].count("0")
        head, _, tail = text.partition(".")
        tail = tail.rstrip("0")
        text = head + "." + tail.ljust(mandatory, "0")
    if fmt.startswith("$"):
        text = ("-$" + text[1:]) if text.startswith("-") else "$" + text
    return text + ("%" if "%" in fmt else "")


def fit_width(texts: list[str], minimum: float = 8.0, maximum: float = 60.0, size: float = 11.0) -> float:
    """Column width for the longest of ``texts`` (each line of a multi-line text counts apart)."""
    longest = max((len(line) for t in texts for line in str(t).split("\n")), default=0)
    width = longest * _FONT_SLACK * size / 11.0 + 2
    return float(min(maximum, max(minimum, math.ceil(width))))


def wrapped_lines(text: str, width: float, size: float = 11.0) -> int:
    """Lines ``text`` takes when wrapped at word boundaries in a column ``width`` units wide.

    About 1.2 characters per width unit: letters are narrower than the digits that define the
    unit (LibreOffice with DejaVu Sans fits about 1.2, Excel with Calibri more).
    """
    per_line = max(4, int((width - 1) * 1.2 * 11.0 / size))
    return sum(len(textwrap.wrap(part, per_line)) or 1 for part in str(text).split("\n"))


ALERT_FILL = PatternFill("solid", start_color="C00000", end_color="C00000")
ALERT_FONT = Font(name=FONT_NAME, size=11, bold=True, color="FFFFFF")


def alert_unless_ok(ws: Any, coordinate: str, ok: str = "ok") -> None:
    """Red fill, white bold text while the cell at ``coordinate`` reads anything but ``ok``."""
    from openpyxl.formatting.rule import CellIsRule

    ws.conditional_formatting.add(
        coordinate, CellIsRule(operator="notEqual", formula=[f'"{ok}"'], fill=ALERT_FILL, font=ALERT_FONT)
    )


def line_height(lines: int, size: float = 11.0) -> float:
    """Row height in points for ``lines`` lines of ``size``-point text."""
    return round(lines * 15.0 * size / 11.0 + 2, 1)


def style_header(ws: Any, row: int, first: int, last: int) -> None:
    """Bold, grey header cells from column ``first`` to ``last`` of ``row``."""
    for col in range(first, last + 1):
        cell = ws.cell(row=row, column=col)
        cell.font = BOLD
        cell.fill = HEADER_FILL
        cell.alignment = WRAP
        cell.border = BOX


def page_setup(ws: Any, last_col: int, last_row: int, title_rows: str | None = None, portrait: bool = False) -> None:
    """Print ``A1:<last_col><last_row>`` on landscape pages (portrait when asked), scaled >= 75 %.

    The scale is fixed (no fit-to-page), chosen so the print area's width fits a landscape
    A4 or Letter page when that needs no more than a 25 % reduction; wider sheets print
    their columns over more pages instead of in unreadable type. ``title_rows`` (``"4:4"``)
    repeat on every page.
    """
    width = sum(ws.column_dimensions[get_column_letter(c)].width or 9.0 for c in range(1, last_col + 1))
    budget = PAGE_WIDTH * (0.72 if portrait else 1.0)
    scale = 100 if width <= budget else max(MIN_SCALE, int(100 * budget / width))
    ws.page_setup.orientation = "portrait" if portrait else "landscape"
    ws.page_setup.scale = scale
    ws.sheet_properties.pageSetUpPr.fitToPage = False
    ws.page_margins.left = ws.page_margins.right = 0.4
    ws.page_margins.top = ws.page_margins.bottom = 0.5
    ws.page_margins.header = ws.page_margins.footer = 0.25
    ws.print_options.gridLines = False
    ws.print_area = f"A1:{get_column_letter(last_col)}{max(1, last_row)}"
    if title_rows:
        ws.print_title_rows = title_rows
    ws.oddFooter.center.text = "&A - page &P of &N"
