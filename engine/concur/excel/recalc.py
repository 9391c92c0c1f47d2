"""Recalculate a workbook with LibreOffice headless and read the results.

How is this designed, and why?
------------------------------
openpyxl writes formulas but never evaluates them, so the only honest check
that a concur workbook *works* is to let a spreadsheet engine recalculate it.
LibreOffice is the oracle: it rejects what Excel rejects (an unprefixed
``CEILING.MATH`` comes back ``#NAME?``) and runs headless in CI.

:func:`recalculate_many` runs one ``soffice --headless --convert-to xlsx``
for a batch of files (one start-up, ~1.5-5 s, instead of one per file) under a
throwaway user profile whose ``registrymodifications.xcu`` sets
``Calc/Formula/Load/OOXMLRecalcMode`` and ``ODFRecalcMode`` to 0 ("always
recalculate"). The default (1, "never") keeps *stale* cached values in a file
that already has them -- exactly the file produced by :func:`set_inputs`
after a first recalculation. The converted copies are then read with
``openpyxl.load_workbook(data_only=True)``: every workbook-scoped defined name
resolves to its cell's cached value.

Worked example: the T1 workbook for Llama-3.1-70B on one H100 with tp = 4
recalculates to ``{"users": 55, "kv_tokens": 451008, ...}``; after
``set_inputs(path, {"tp": 8}, out)`` and another recalculation, ``users`` is 162.

Non-goals: evaluating formulas in Python (LibreOffice is the reference),
driving LibreOffice over UNO, Goal Seek.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConcurError, UnknownNameError, UsageError
from .cells import put_number, put_text, save_atomically

__all__ = [
    "ERROR_CODES",
    "RecalcError",
    "convert_many",
    "find_soffice",
    "read_names",
    "recalculate",
    "recalculate_many",
    "recalculate_values",
    "set_inputs",
    "workbook_errors",
]

ERROR_CODES = ("#NAME?", "#VALUE!", "#DIV/0!", "#NUM!", "#REF!", "#N/A", "#NULL!")

_PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" \
xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="OOXMLRecalcMode" \
oor:op="fuse"><value>0</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="ODFRecalcMode" \
oor:op="fuse"><value>0</value></prop></item>
</oor:items>
"""


class RecalcError(ConcurError, RuntimeError):
    """LibreOffice is missing, timed out, or did not produce a recalculated file."""


def find_soffice() -> str:
    """Path of the ``soffice`` executable; raises :class:`RecalcError` when absent."""
    exe = shutil.which("soffice") or shutil.which("libreoffice")
    if exe is None:
        raise RecalcError(
            "LibreOffice (soffice) is not on PATH; it is needed to recalculate workbooks",
            hint="install it (Debian/Ubuntu: apt-get install libreoffice-calc-nogui) or skip the check",
        )
    return exe


def recalculate_many(
    paths: Iterable[str | os.PathLike[str]], outdir: str | os.PathLike[str], timeout: float = 180.0
) -> list[Path]:
    """Recalculate every workbook in one LibreOffice run; return the recalculated copies.

    The copies land in ``outdir`` under their original file names (so the
    inputs must have distinct names). Blocks up to ``timeout`` seconds.
    Raises :class:`RecalcError` when LibreOffice is missing, times out, or
    does not write a file.
    """
    return convert_many(paths, outdir, "xlsx", timeout)


def convert_many(
    paths: Iterable[str | os.PathLike[str]], outdir: str | os.PathLike[str], fmt: str, timeout: float = 180.0
) -> list[Path]:
    """Open every workbook in one recalculating LibreOffice run and save it as ``fmt`` (xlsx, pdf).

    Returns ``outdir/<stem>.<fmt>`` for each input; raises :class:`RecalcError` as
    :func:`recalculate_many` does.
    """
    sources = [Path(p).resolve() for p in paths]
    if len({p.stem for p in sources}) != len(sources):
        raise UsageError(
            "workbooks converted together need distinct file names", hint="rename or convert them separately"
        )
    for src in sources:
        if not src.is_file():
            raise UsageError(f"workbook '{src}' does not exist", hint="write it first")
    exe = find_soffice()
    out = Path(outdir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="concur-lo-") as profile:
        user = Path(profile) / "user"
        user.mkdir()
        (user / "registrymodifications.xcu").write_text(_PROFILE, encoding="utf-8")
        cmd = [
            exe,
            "--headless",
            "--norestore",
            "--nolockcheck",
            f"-env:UserInstallation={Path(profile).as_uri()}",
            "--convert-to",
            fmt,
            "--outdir",
            str(out),
            *map(str, sources),
        ]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False
            )  # success = file written
        except subprocess.TimeoutExpired:
            raise RecalcError(
                f"LibreOffice did not finish converting within {timeout:g} s",
                hint="is another soffice hanging? raise the timeout for big workbooks",
            ) from None
    results = [out / f"{src.stem}.{fmt}" for src in sources]
    missing = [str(r) for r in results if not r.is_file()]
    if missing:
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RecalcError(
            f"LibreOffice wrote no {fmt} file for {', '.join(missing)} (exit {proc.returncode}: {detail[0]})",
            hint="open the workbook in LibreOffice to see why",
        )
    return results


def read_names(path: str | os.PathLike[str], names: Iterable[str] | None = None) -> dict[str, Any]:
    """Cached values of workbook-scoped defined names (all when ``names`` is None).

    Values are numbers, text, booleans, or error codes such as ``"#NAME?"``.
    Raises :class:`UnknownNameError` for a requested name the workbook lacks.
    """
    from openpyxl import load_workbook

    wb = load_workbook(path, data_only=True)
    wanted = list(wb.defined_names) if names is None else list(names)
    out: dict[str, Any] = {}
    for name in wanted:
        if name not in wb.defined_names:
            raise UnknownNameError(
                f"workbook {Path(path).name} has no defined name '{name}'",
                variable=name,
                hint="see the Notes sheet for renamed variables",
            )
        dests = list(wb.defined_names[name].destinations)
        if len(dests) != 1:
            continue  # ranges and constants are not variables
        sheet, coord = dests[0]
        out[name] = wb[sheet][coord.replace("$", "")].value
    return out


def workbook_errors(path: str | os.PathLike[str]) -> list[str]:
    """Every cell holding an error value after recalculation, as ``Sheet!A1: #CODE``.

    Text cells that merely look like error codes are not errors.
    """
    from openpyxl import load_workbook

    wb = load_workbook(path, data_only=True)
    found = []
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if cell.data_type == "e":
                    found.append(f"{ws.title}!{cell.coordinate}: {cell.value}")
    return found


def recalculate(path: str | os.PathLike[str], timeout: float = 180.0) -> dict[str, Any]:
    """Recalculate ``path`` in LibreOffice; return every defined name's value.

    ``path`` is not modified. Raises :class:`RecalcError` when LibreOffice is
    missing or fails.
    """
    with tempfile.TemporaryDirectory(prefix="concur-recalc-") as tmp:
        (out,) = recalculate_many([path], tmp, timeout=timeout)
        return read_names(out)


def recalculate_values(path: str | os.PathLike[str], names: Iterable[str], timeout: float = 180.0) -> dict[str, Any]:
    """Like :func:`recalculate`, restricted to ``names`` (unknown names raise)."""
    with tempfile.TemporaryDirectory(prefix="concur-recalc-") as tmp:
        (out,) = recalculate_many([path], tmp, timeout=timeout)
        return read_names(out, names)


def set_inputs(path: str | os.PathLike[str], values: Mapping[str, float | str], out: str | os.PathLike[str]) -> Path:
    """Copy workbook ``path`` to ``out`` with the named input cells set to ``values``.

    Keys are defined names (variable names, or the renamed name for the few
    that Excel would misread); numbers are in the display unit shown on the
    Inputs sheet; strings choose a preset id. Formulas elsewhere are kept.
    Raises :class:`UnknownNameError` for a name the workbook lacks.
    """
    from openpyxl import load_workbook

    wb = load_workbook(path)
    for name, value in values.items():
        if name not in wb.defined_names:
            raise UnknownNameError(
                f"workbook {Path(path).name} has no input named '{name}'",
                variable=name,
                hint="see the Inputs sheet for the names",
            )
        ((sheet, coord),) = list(wb.defined_names[name].destinations)
        ws = wb[sheet]
        cell = ws[coord.replace("$", "")]
        fmt = cell.number_format
        if isinstance(value, str):
            put_text(ws, cell.row, cell.column, value)
        else:
            put_number(ws, cell.row, cell.column, value).number_format = fmt
    return save_atomically(wb, Path(out))
