"""Columns of numbers out: CSV streamed at numpy speed, JSON lists, and a table a person can read.

How it is designed, and why
---------------------------
A sweep answers with arrays (a million points is ordinary); formatting them one cell at a time in
Python costs more than computing them, and holding a million formatted rows costs hundreds of
MiB. So output works on *blocks* -- a run of rows sharing leading text cells (the ``config``
label of a ``--compare`` combination) and a list of equal-length columns -- and on *chunks* of
:data:`CHUNK` rows within a block:

* **CSV**: per chunk, each column becomes a Python list in C (``ndarray.tolist``), the columns are
  interleaved by slice assignment, and one ``%`` operation with a format repeated per row renders
  the chunk (the loop runs inside ``str.__mod__``). ``%s`` of a float is its shortest round-trip
  text (``0.1``, ``1.0002550002550004``), so the file reads back to the same doubles. Missing
  values (NaN) are empty cells; text cells are quoted when CSV needs it. Memory stays at the
  arrays plus one chunk of text; the time is within a small factor of ``numpy.savetxt`` (which
  formats row by row and writes 17 digits), measured by ``concur bench sweep``.
* **JSON**: ``ndarray.tolist`` again, NaN as ``null``.
* **The text table** is for reading: up to :data:`SUMMARY_ROWS` rows are all shown; past that,
  the first and last :data:`EDGE_ROWS` with a line saying how many are not shown (``--all`` shows
  every row, formatted chunk by chunk in two passes so memory stays flat).

Columns are numpy arrays (floats, NaN for "no answer"; integers) or object arrays of text (choices,
preset ids) or of whole numbers with ``None`` for "no answer" (an integer variable); nothing here knows about models or units -- the caller names the columns.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import IO, Any

from ..records import record

__all__ = [
    "CHUNK",
    "EDGE_ROWS",
    "SUMMARY_ROWS",
    "Block",
    "cell_text",
    "csv_quote",
    "json_column",
    "spreadsheet_text",
    "write_csv",
    "write_table",
]

CHUNK = 65_536
SUMMARY_ROWS = 200
EDGE_ROWS = 10


@record
class Block:
    """Rows sharing the leading text ``cells`` (possibly none), followed by ``columns`` (equal lengths)."""

    cells: tuple[str, ...]
    columns: Sequence[Any]

    @property
    def rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(text: str) -> str:
    """``text`` prefixed with ``'`` when a spreadsheet would read it as a formula (it begins with
    ``= + - @``, a tab or a carriage return), as spreadsheet tools expect; a number stays a number.

    >>> spreadsheet_text("=HYPERLINK(1)"), spreadsheet_text("-2.5"), spreadsheet_text("gpu")
    ("'=HYPERLINK(1)", '-2.5', 'gpu')
    """
    if not text.startswith(_FORMULA_START):
        return text
    try:
        float(text)
        return text
    except ValueError:
        return "'" + text


def csv_quote(text: str) -> str:
    """``text`` as one CSV cell (RFC 4180: quoted when it holds a comma, quote or line break),
    formula-like text prefixed (:func:`spreadsheet_text`).

    >>> csv_quote("kv_dtype=bf16, gpu=b200"), csv_quote("@SUM(A1)")
    ('"kv_dtype=bf16, gpu=b200"', "'@SUM(A1)")
    """
    text = spreadsheet_text(text)
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _cells(column: Any, start: int, stop: int, *, empty: Any, quote: bool = False) -> list[Any]:
    """One chunk of a column as Python values: numbers (NaN -> ``empty``) or texts (CSV-quoted with ``quote``)."""
    import numpy as np

    part = column[start:stop]
    if getattr(part, "dtype", None) is not None and part.dtype.kind in "fiu":
        values: list[Any] = part.tolist()
        if part.dtype.kind == "f":
            for i in np.flatnonzero(np.isnan(part)).tolist():
                values[i] = empty
        return values
    texts: dict[Any, Any] = {}
    out = []
    for v in part.tolist() if hasattr(part, "tolist") else list(part):
        if v not in texts:
            texts[v] = empty if v is None else v if type(v) is int else csv_quote(str(v)) if quote else str(v)
        out.append(texts[v])
    return out


def write_csv(out: IO[str], header: Sequence[str], blocks: Sequence[Block]) -> int:
    """Write ``header`` and every block's rows as CSV to ``out``, chunk by chunk; return the rows written."""
    out.write(",".join(csv_quote(h) for h in header) + "\n")
    written = 0
    for block in blocks:
        k = len(block.columns)
        prefix = "".join(csv_quote(c).replace("%", "%%") + "," for c in block.cells)
        row_format = prefix + ",".join(["%s"] * k) + "\n"
        for start in range(0, block.rows, CHUNK):
            stop = min(start + CHUNK, block.rows)
            n = stop - start
            flat: list[Any] = [None] * (n * k)
            for j, column in enumerate(block.columns):
                flat[j::k] = _cells(column, start, stop, empty="", quote=True)
            out.write((row_format * n) % tuple(flat))
            written += n
    return written


def json_column(column: Any) -> list[Any]:
    """A column as a JSON-ready list: floats, texts, and ``None`` for NaN."""
    return _cells(column, 0, len(column), empty=None)


def cell_text(value: Any) -> str:
    """A value as the table shows it: whole numbers with separators, else 6 significant digits."""
    if value is None:
        return "nan"
    if isinstance(value, str):
        return value
    value = float(value)
    if math.isnan(value):
        return "nan"
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}" if abs(value) >= 1e-3 else f"{value:.4g}"


def _rows(blocks: Sequence[Block], start: int, stop: int) -> Iterator[list[str]]:
    """Rows ``start..stop`` (over all blocks, in order) as texts."""
    offset = 0
    for block in blocks:
        lo, hi = max(start - offset, 0), min(stop - offset, block.rows)
        for first in range(lo, hi, CHUNK):
            last = min(first + CHUNK, hi)
            cols = [_cells(c, first, last, empty=None) for c in block.columns]
            for row in zip(*cols):
                yield list(block.cells) + [cell_text(v) for v in row]
        offset += block.rows


def write_table(
    out: IO[str], header: Sequence[str], blocks: Sequence[Block], *, show_all: bool = False, left: int = 0
) -> None:
    """An aligned table (numbers right-aligned, the first ``left`` columns left-aligned).

    Past :data:`SUMMARY_ROWS` rows only the first and last :data:`EDGE_ROWS` are shown, with a line
    saying how many are not, unless ``show_all``.
    """
    total = sum(b.rows for b in blocks)
    if show_all or total <= SUMMARY_ROWS:
        spans = [(0, total)]
    else:
        spans = [(0, EDGE_ROWS), (total - EDGE_ROWS, total)]
    widths = [len(h) for h in header]
    for lo, hi in spans:  # first pass: widths (chunk by chunk, nothing kept)
        for row in _rows(blocks, lo, hi):
            widths = [max(w, len(c)) for w, c in zip(widths, row)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if j < left else c.rjust(w) for j, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out.write(line(header) + "\n")
    for i, (lo, hi) in enumerate(spans):
        if i:
            hidden = spans[i][0] - spans[i - 1][1]
            out.write(f"... {hidden:,} more rows (--all prints every row; --csv FILE writes them) ...\n")
        for row in _rows(blocks, lo, hi):
            out.write(line(row) + "\n")
