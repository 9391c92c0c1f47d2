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

Saving (:func:`save_atomically`): the file appears whole or not at all (temporary file and
rename, :mod:`concur.writefile`), with the permissions any new file gets under the umask, and
with the same bytes every time for the same workbook (:func:`reproducible`), so a committed workbook
changes only when its content does.

Non-goals: sanitising text for CSV export (strings here never leave the xlsx
cell type) and hiding formulas.
"""

from __future__ import annotations

import io
import math
import os
import re
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..writefile import write_output

if TYPE_CHECKING:
    from openpyxl.cell.cell import Cell
    from openpyxl.worksheet.worksheet import Worksheet

    from .sheet_rows import SheetRows

__all__ = [
    "FIXED_TIME",
    "MAX_FORMULA_LENGTH",
    "UnprintableError",
    "clean_text",
    "put_formula",
    "put_number",
    "put_text",
    "reproducible",
    "require_folder",
    "save_atomically",
]

MAX_FORMULA_LENGTH = 8192  # characters in one Excel formula, the "=" included


class UnprintableError(UsageError):
    """An expression uses a construct with no faithful Excel formula."""


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


def save_atomically(wb: Any, target: Path, rows: Sequence[SheetRows] = ()) -> Path:
    """Save ``wb`` reproducibly at ``target`` through :func:`concur.writefile.write_output`: a
    regular file (or a new path) appears whole or not at all, with a replaced file's permission
    bits (a new one's under the umask); a FIFO or device is written in place; a symlink is
    followed, never replaced. A folder that does not exist is a :class:`UsageError`, not created.
    ``rows``: table rows kept as XML (:mod:`concur.excel.sheet_rows`), spliced into their sheets.

    openpyxl writes straight into a :class:`_FixedZip` (one compression, the bytes
    :func:`reproducible` would give), through :class:`openpyxl.writer.excel.ExcelWriter`, the
    two lines of ``Workbook.save`` less the clock.
    """
    from openpyxl.writer.excel import ExcelWriter

    target = require_folder(target)
    buffer = io.BytesIO()
    with _FixedZip(buffer, rows) as archive:
        ExcelWriter(wb, archive).save()
    archive.check()
    write_output(target, buffer.getvalue())
    return target


def require_folder(target: str | os.PathLike[str]) -> Path:
    """``target`` as a Path; a :class:`UsageError` when its folder does not exist (never created)."""
    path = Path(target)
    if not path.parent.is_dir():
        raise UsageError(
            f"cannot write '{path}': folder '{path.parent}' does not exist",
            hint="create the folder first, or give another path",
        )
    return path


FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the zip epoch: entry times and document dates
_CORE_DATES = re.compile(rb"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:)")


def _stamp() -> tuple[int, int, int, int, int, int]:
    """:data:`FIXED_TIME`, or ``SOURCE_DATE_EPOCH`` when set (not before 1980: zip cannot hold it)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        y, mo, d, h, mi, sec = time.gmtime(max(int(epoch), 315532800))[:6]
        return y, mo, d, h, mi, sec
    return FIXED_TIME


class _FixedZip(zipfile.ZipFile):
    """A zip being written whose every entry has the time of :func:`_stamp` and no system or file
    attributes, with the core properties' dates set to it and table rows spliced into their
    worksheet parts (``rows``; :func:`concur.excel.sheet_rows.splice`). A worksheet part is
    matched by its sheet's part name at the time it is written (openpyxl numbers the sheets as
    it writes them). :meth:`check` raises when some rows found no part."""

    def __init__(self, file: Any, rows: Sequence[SheetRows] = ()) -> None:
        super().__init__(file, "w", zipfile.ZIP_DEFLATED)
        self.stamp = _stamp()
        self.rows = list(rows)
        self.spliced: set[int] = set()

    def _edit(self, name: str, body: bytes) -> bytes:
        if name == "docProps/core.xml":
            iso = "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z".format(*self.stamp).encode()
            return _CORE_DATES.sub(lambda m: m.group(1) + iso + m.group(3), body)
        for i, rows in enumerate(self.rows):
            if i not in self.spliced and name == str(rows.ws.path).lstrip("/"):
                from .sheet_rows import splice

                self.spliced.add(i)
                return splice(body, rows)
        return body

    def writestr(self, zinfo_or_arcname: Any, data: Any, *args: Any, **kwargs: Any) -> None:
        name = zinfo_or_arcname.filename if isinstance(zinfo_or_arcname, zipfile.ZipInfo) else str(zinfo_or_arcname)
        body = self._edit(name, data.encode() if isinstance(data, str) else bytes(data))
        entry = zipfile.ZipInfo(name, date_time=self.stamp)
        entry.compress_type = zipfile.ZIP_DEFLATED
        entry.create_system = 0
        entry.external_attr = 0
        super().writestr(entry, body)

    def write(self, filename: Any, arcname: Any = None, *args: Any, **kwargs: Any) -> None:
        with open(filename, "rb") as src:
            self.writestr(str(arcname if arcname is not None else filename), src.read())

    def check(self) -> None:
        missing = [r.ws.title for i, r in enumerate(self.rows) if i not in self.spliced]
        if missing:
            raise RuntimeError(f"table rows for sheets the workbook does not have: {missing}")


def reproducible(data: bytes, rows: Sequence[SheetRows] = ()) -> bytes:
    """The xlsx ``data`` with nothing that depends on when it was written.

    openpyxl stamps the core properties' ``modified`` with the clock and the zip entries with
    the local time; both become :data:`FIXED_TIME` (``SOURCE_DATE_EPOCH`` overrides it, as for
    reproducible builds). Entries keep their order and are recompressed with fixed metadata,
    so two exports of the same question are byte-identical (:func:`save_atomically` writes
    these bytes in one pass). ``rows`` are spliced into their worksheet parts, as there.
    """
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with _FixedZip(out, rows) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    dst.check()
    return out.getvalue()
