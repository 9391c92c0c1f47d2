"""Safe cell writing: user text is always a string cell, never a formula.

openpyxl decides a cell's type from the Python value: any ``str`` longer than
one character that starts with ``=`` becomes a *formula*, and strings equal to
an error code (``#N/A``, ``#DIV/0!``...) become *error* cells. A pack
description such as ``=cmd|'/c calc'!A1`` would therefore be written as a
live DDE formula (CWE-1236, OWASP ASVS 1.2.10). Every label, description, unit
and equation text in a concur workbook goes through :func:`put_text`, which
forces ``data_type = "s"`` after assignment, so the cell holds exactly the
characters given, whatever they start with (``= + - @``, tab, NUL are all kept
as text). Control characters other than tab and newline are not allowed in
XML 1.0 and are replaced by U+FFFD so the file stays loadable.

Formulas the writer itself prints go through :func:`put_formula`, which is the
only place a ``data_type = "f"`` cell is created; numbers go through
:func:`put_number`.

Non-goals: sanitising text for CSV export (strings here never leave the xlsx
cell type) and hiding formulas.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from openpyxl.cell.cell import Cell
    from openpyxl.worksheet.worksheet import Worksheet

__all__ = ["clean_text", "put_formula", "put_number", "put_text", "unit_format"]

_ILLEGAL_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_MAX_CELL_TEXT = 32767  # Excel's limit on characters in one cell


def clean_text(text: Any) -> str:
    """``str(text)`` with XML-illegal control characters replaced, cut to Excel's cell limit."""
    s = _ILLEGAL_XML.sub("\ufffd", str(text))
    return s[:_MAX_CELL_TEXT]


def put_text(ws: Worksheet, row: int, col: int, text: Any) -> Cell:
    """Write ``text`` at (row, col) as a plain string cell and return the cell.

    The cell's type is forced to string, so text beginning with ``=``, ``+``,
    ``-`` or ``@`` and text that looks like an error code stay text.
    """
    cell = ws.cell(row=row, column=col)
    cell.value = clean_text(text)
    cell.data_type = "s"
    return cell


def put_formula(ws: Worksheet, row: int, col: int, formula: str) -> Cell:
    """Write a formula the writer printed (text without the leading ``=``)."""
    if formula.startswith("="):
        raise UsageError(
            f"internal formula text must not start with '=': {formula[:40]!r}",
            hint="pass the formula body; put_formula adds the '='",
        )
    cell = ws.cell(row=row, column=col)
    cell.value = "=" + formula
    cell.data_type = "f"
    return cell


def put_number(ws: Worksheet, row: int, col: int, value: float) -> Cell:
    """Write a finite number; NaN and infinities are refused (xlsx cannot hold them)."""
    v = float(value)
    if not math.isfinite(v):
        raise UsageError(
            f"cannot write {value!r} to cell {ws.title}!R{row}C{col}: not a finite number",
            hint="the solver must hand the writer finite values",
        )
    cell = ws.cell(row=row, column=col)
    cell.value = int(v) if v.is_integer() and abs(v) < 2**53 else v
    return cell


def unit_format(unit: str, value: float | None = None, integer: bool = False) -> str:
    """A number format that shows ``unit`` after the number and keeps the cell numeric.

    Integers get ``#,##0``; other values ``#,##0.0`` from 100 up, ``0.00`` from 1 up and
    ``General`` below (so 0.00487 s is not shown as 0.00). Quotes in the unit are dropped.

        >>> unit_format("GiB", 79.18)
        '0.00" GiB"'
    """
    if integer:
        body = "#,##0"
    elif value is not None and math.isfinite(value) and abs(value) >= 100:
        body = "#,##0.0"
    elif value is not None and math.isfinite(value) and abs(value) >= 1:
        body = "0.00"
    else:
        body = "General"
    text = clean_text(unit).replace('"', "").replace("\n", " ").strip()
    return f'{body}" {text}"' if text else body


def save_atomically(wb: Any, target: Path) -> Path:
    """Save ``wb`` to a temp file beside ``target``, then rename: readers never see half a workbook."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        wb.save(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
