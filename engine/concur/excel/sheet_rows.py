"""Table rows written as worksheet XML when the workbook is saved, not as openpyxl cells.

How is this designed, and why?
------------------------------
A candidate table is large and regular: the fleet workbook's ``Search replicas`` holds 64 rows
of about 560 cells, every one a number or a formula the writer printed, styled like the cell
above it. openpyxl makes a ``Cell`` object per cell and, when saving, an element tree per cell:
about 0.7 s of the 1.7 s export. :class:`SheetRows` keeps such rows as the XML text openpyxl
would have written instead, and :func:`splice` puts them into the sheet's ``<sheetData>`` when
:func:`concur.excel.cells.save_atomically` saves the workbook.

Invariants:

* A reader sees the cells openpyxl would have written: the same reference, style index, type and
  formula or number (a formula cell is ``<c r=.. s=..><f>TEXT</f><v/></c>``, a number
  ``<c r=.. s=.. t="n"><v>N</v></c>``); ``tests/excel/test_sheet_rows.py`` compares every cell
  of the shipped workbooks with the same workbooks written through openpyxl alone.
* A cell's style is the style of a real cell of the same sheet (:meth:`SheetRows.style_of`), so
  it is registered in the workbook's style table before the workbook is saved.
* The rows follow every row openpyxl writes on that sheet and come in increasing order (both
  checked; a breach is a :class:`RuntimeError`, a bug in the writer); the sheet's
  ``<dimension>`` grows to cover them.
* Formula text is checked like :func:`concur.excel.cells.put_formula` (no leading ``=``, no
  character XML 1.0 cannot hold) and escaped, once per template; what fills a template's tokens
  is a whole number's digits, which need no escaping.

Non-goals: text cells (they go through :func:`concur.excel.cells.put_text`), row heights,
comments, hyperlinks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from openpyxl.utils import get_column_letter
from openpyxl.utils.cell import range_boundaries

from ..errors import UsageError

__all__ = ["SheetRows", "splice"]

_ILLEGAL_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_DIMENSION = re.compile(rb'<dimension ref="([^"]*)"\s*/>')
_EMPTY_DATA = re.compile(rb"<sheetData\s*/>")


def _escape(text: str) -> str:
    """``text`` as XML character data (what ``xml.sax.saxutils.escape`` does, without importing
    ``urllib.request`` and ``ssl`` with it)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SheetRows:
    """Rows of numbers and formulas for worksheet ``ws``, kept as XML text until it is saved.

    A table's rows differ only in their numbers: :meth:`template` builds one row's XML with
    tokens where the numbers go (the row number, a candidate...), checked and escaped once;
    :meth:`add` appends it for one row with the tokens filled in.
    """

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self._parts: list[str] = []
        self.first_row = 0
        self.last_row = 0
        self.last_col = 0

    def style_of(self, cell: Any) -> str:
        """The style attribute that gives a cell ``cell``'s style (empty for the default style)."""
        if cell.parent is not self.ws:
            raise RuntimeError(f"style_of: cell {cell.coordinate} is not on sheet '{self.ws.title}'")
        return f' s="{cell.style_id}"' if cell.has_style else ""

    def template(self, cells: Sequence[tuple[int, str, str]], row: str, number: str) -> str:
        """The XML of one row whose number is the token ``row``: ``cells`` are (column, formula
        text without the leading ``=``, style attribute from :meth:`style_of`) in column order;
        the formula ``number`` (a token) makes a number cell holding that token's value."""
        parts = [f'<row r="{row}">']
        last = 0
        for col, formula, style in cells:
            if col <= last:
                raise RuntimeError(f"sheet '{self.ws.title}': column {col} after column {last}")
            last = col
            ref = f"{get_column_letter(col)}{row}"
            if formula == number:
                parts.append(f'<c r="{ref}"{style} t="n"><v>{number}</v></c>')
                continue
            if formula.startswith("=") or _ILLEGAL_XML.search(formula):
                raise UsageError(
                    f"internal formula text must not start with '=' or hold control characters: {formula[:40]!r}",
                    hint="pass the formula body; the '=' is added",
                )
            parts.append(f'<c r="{ref}"{style}><f>{_escape(formula)}</f><v></v></c>')
        self.last_col = max(self.last_col, last)
        parts.append("</row>")
        return "".join(parts)

    def add(self, template: str, row: int, fills: Mapping[str, int]) -> None:
        """Append ``template`` as row ``row`` (after the rows already added), each token of ``fills``
        replaced by its whole number."""
        if row <= self.last_row:
            raise RuntimeError(f"sheet '{self.ws.title}': row {row} after row {self.last_row}")
        text = template
        for token, value in fills.items():
            text = text.replace(token, str(int(value)))
        self._parts.append(text)
        self.first_row = self.first_row or row
        self.last_row = row

    def xml(self) -> bytes:
        """The rows as ``<row>`` elements."""
        return "".join(self._parts).encode()


def splice(sheet_xml: bytes, rows: SheetRows) -> bytes:
    """``sheet_xml`` (a worksheet part openpyxl wrote) with ``rows`` appended to its ``<sheetData>``
    and its ``<dimension>`` covering them. Checks that openpyxl wrote no row at or below the first."""
    if not rows.last_row:
        return sheet_xml
    ws = rows.ws
    taken = [r for r, _ in ws._cells] + list(ws.row_dimensions)
    if taken and max(taken) >= rows.first_row:
        raise RuntimeError(
            f"sheet '{ws.title}': openpyxl writes row {max(taken)}, the XML rows start at {rows.first_row}"
        )
    body = rows.xml()
    end = sheet_xml.rfind(b"</sheetData>")
    if end >= 0:
        sheet_xml = sheet_xml[:end] + body + sheet_xml[end:]
    else:
        sheet_xml, n = _EMPTY_DATA.subn(lambda _: b"<sheetData>" + body + b"</sheetData>", sheet_xml, 1)
        if n != 1:
            raise RuntimeError(f"sheet '{ws.title}': no <sheetData> in the worksheet openpyxl wrote")
    return _DIMENSION.sub(lambda m: _grown(m.group(1), rows), sheet_xml, count=1)


def _grown(ref: bytes, rows: SheetRows) -> bytes:
    """The dimension ``ref`` (``A1:K6``, or ``A1`` for one cell) widened to hold ``rows``."""
    min_col, min_row, max_col, max_row = range_boundaries(ref.decode())
    max_col = max(max_col or 1, rows.last_col)
    max_row = max(max_row or 1, rows.last_row)
    low = f"{get_column_letter(min_col or 1)}{min_row or 1}"
    return f'<dimension ref="{low}:{get_column_letter(max_col)}{max_row}" />'.encode()
