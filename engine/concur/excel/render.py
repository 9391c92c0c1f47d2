"""Look at a workbook the way a reviewer does: LibreOffice's PDF, its text, and a PNG of page one.

How is this designed, and why?
------------------------------
A workbook can recalculate perfectly and still be unusable on paper: a number too wide for
its column prints as ``###``, a formula the reader's program lacks prints ``#NAME?``, a long
citation squeezes a page into unreadable type. None of that shows in cell values, so this
module renders the workbook the way a reviewer sees it and reads the result:

* :func:`render_pdfs` -- one recalculating LibreOffice run (the throwaway profile of
  :mod:`concur.excel.recalc`) converts every workbook to PDF, printing each sheet's print area
  with its page setup;
* :func:`pdf_text` -- ``pdftotext -layout`` (poppler-utils) gives the printed text;
* :func:`print_problems` -- what must never be printed: ``###`` (a column too narrow) and the
  error values ``#NAME?``, ``#VALUE!``, ``#REF!``, ``#DIV/0!``, ``#N/A``, ``#NUM!``, ``#NULL!``
  and LibreOffice's ``Err:NNN``;
* :func:`first_page_png` -- ``pdftoppm`` draws page one, the picture ``docs/workbooks.md`` shows.

Command line (regenerates the documentation's pictures and fails on a problem)::

    python -m concur.excel.render workbooks/*.xlsx            # -> docs/img/workbook-<name>.png
    python -m concur.excel.render --outdir /tmp/look book.xlsx

Worked example: the LLM capacity workbook renders to about a dozen landscape pages; page
one shows the title, the scenario line, ``users 55``, ``replicas 12``, ``$3.16`` per million
tokens and ``$87,600`` a month in large type, then the inputs.

Non-goals: comparing pictures pixel by pixel (fonts differ between machines), rendering
with Microsoft Excel.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .recalc import RecalcError, convert_many

__all__ = ["PRINT_ERRORS", "first_page_png", "main", "pdf_text", "print_problems", "render_pdfs"]

PRINT_ERRORS = ("###", "#NAME?", "#VALUE!", "#REF!", "#DIV/0!", "#N/A", "#NUM!", "#NULL!", "Err:")
_ERROR_RE = re.compile("|".join(re.escape(e) for e in PRINT_ERRORS))


def _tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        raise RecalcError(
            f"'{name}' is not on PATH; it is needed to read the rendered workbook",
            hint="install poppler-utils (Debian/Ubuntu: apt-get install poppler-utils)",
        )
    return exe


def render_pdfs(
    paths: Iterable[str | os.PathLike[str]], outdir: str | os.PathLike[str], timeout: float = 300.0
) -> list[Path]:
    """PDFs of the workbooks as LibreOffice prints them (recalculated), in ``outdir``."""
    return convert_many(paths, outdir, "pdf", timeout)


def pdf_text(pdf: str | os.PathLike[str]) -> str:
    """The PDF's text with its layout (``pdftotext -layout``)."""
    proc = subprocess.run(
        [_tool("pdftotext"), "-layout", str(pdf), "-"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if proc.returncode != 0:
        raise RecalcError(f"pdftotext could not read {pdf}: {proc.stderr.strip()[:200]}")
    return proc.stdout


def print_problems(text: str) -> list[str]:
    """Each printed line holding ``###`` or an error value, stripped (empty when the print is clean)."""
    return [line.strip() for line in text.splitlines() if _ERROR_RE.search(line)]


def first_page_png(pdf: str | os.PathLike[str], png: str | os.PathLike[str], dpi: int = 80) -> Path:
    """Page one of ``pdf`` as a PNG at ``dpi`` (``pdftoppm -singlefile``), written to ``png``."""
    target = Path(png)
    with tempfile.TemporaryDirectory(prefix="concur-png-") as tmp:
        stem = Path(tmp) / "page"
        proc = subprocess.run(
            [_tool("pdftoppm"), "-png", "-r", str(dpi), "-f", "1", "-l", "1", "-singlefile", str(pdf), str(stem)],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        made = stem.with_suffix(".png")
        if proc.returncode != 0 or not made.is_file():
            raise RecalcError(f"pdftoppm could not draw {pdf}: {proc.stderr.strip()[:200]}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(made, target)
    return target


def main(argv: list[str] | None = None) -> int:
    """Render workbooks, write ``<outdir>/workbook-<stem>.png``, report what prints badly (exit 1)."""
    parser = argparse.ArgumentParser(prog="python -m concur.excel.render", description=__doc__.split("\n")[0])
    parser.add_argument("workbooks", nargs="+", help=".xlsx files")
    parser.add_argument("--outdir", default="docs/img", help="where the PNGs go (default docs/img)")
    parser.add_argument("--dpi", type=int, default=80)
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="concur-render-") as tmp:
            pdfs = render_pdfs(args.workbooks, tmp)
            bad = 0
            for book, pdf in zip(args.workbooks, pdfs):
                png = first_page_png(pdf, Path(args.outdir) / f"workbook-{Path(book).stem}.png", args.dpi)
                problems = print_problems(pdf_text(pdf))
                bad += len(problems)
                print(f"{book}: {png}" + (f"; prints badly: {problems[:3]}" if problems else ""))
    except RecalcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
