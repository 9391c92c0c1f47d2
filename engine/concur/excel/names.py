"""Defined-name mangling: variable names Excel would misread get a safe name.

Every workbook formula refers to variables through workbook-scoped defined
names, so a reader sees ``=kv_tokens/context`` rather than ``=Model!$C$9/Inputs!$C$12``.
Most variable names are valid defined names and are kept *exactly*
(``users``, ``tp``, ``kv_per_token``). ECMA-376 (Part 1, "Names") and Excel
refuse or misread the rest:

* names that look like an A1 cell reference: letters ``A``..``XFD`` followed by
  a row ``1``..``1048576`` (``cpu2``, ``Q1``, ``xfd1048576``) -- Excel "repairs"
  the file and drops the name;
* R1C1-style references: ``R``, ``C``, ``RC``, ``R1C1``, ``R[2]C``... -- in any
  case;
* the booleans ``TRUE`` and ``FALSE`` (LibreOffice evaluates them as booleans);
* names not starting with a letter, ``_`` or ``\\``, names with characters other
  than letters, digits, ``_`` and ``.``, and names longer than 255 characters.

Such a name becomes ``v_<name>`` (illegal characters replaced by ``_``,
truncated to fit, and suffixed ``_2``, ``_3``... on a clash, compared
case-insensitively because Excel names are case-insensitive). The mapping is
deterministic: the same variable list always gives the same names, and the
Notes sheet lists every renamed variable.

Worked example: ``mangle_all(["users", "cpu2", "TRUE", "r", "v_cpu2"])`` gives
``users -> users``, ``cpu2 -> v_cpu2``, ``TRUE -> v_TRUE``, ``r -> v_r`` and,
because ``v_cpu2`` is taken by the renamed ``cpu2`` (renames are assigned
after every valid name is reserved, so a valid ``v_cpu2`` keeps its name and
the renamed ``cpu2`` becomes ``v_cpu2_2``).

Non-goals: sheet-scoped names, and names of Excel functions (``SUM`` is a valid
defined name; Excel tells them apart by the parenthesis).
"""

from __future__ import annotations

import re

__all__ = ["MAX_NAME_LENGTH", "is_valid_name", "mangle", "mangle_all"]

MAX_NAME_LENGTH = 255

_CHARS = re.compile(r"^[A-Za-z_\\][A-Za-z0-9_.]*$")
_A1 = re.compile(r"^([A-Za-z]{1,3})([0-9]+)$")
_R1C1 = re.compile(r"^(R(\[-?[0-9]+\]|[0-9]+)?)?(C(\[-?[0-9]+\]|[0-9]+)?)?$", re.IGNORECASE)
_MAX_COL = 16384  # XFD
_MAX_ROW = 1048576


def _column_number(letters: str) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + (ord(ch) - 64)
    return n


def _looks_like_cell(name: str) -> bool:
    m = _A1.match(name)
    if not m:
        return False
    col = _column_number(m.group(1))
    row = int(m.group(2))
    return col <= _MAX_COL and 1 <= row <= _MAX_ROW


def is_valid_name(name: str) -> bool:
    """True when Excel and LibreOffice read ``name`` as a defined name unchanged."""
    if not name or len(name) > MAX_NAME_LENGTH or not _CHARS.match(name):
        return False
    if name.upper() in ("TRUE", "FALSE"):
        return False
    if _looks_like_cell(name):
        return False
    return not _R1C1.match(name)  # R1C1 matches "" too, rejected above


def mangle(name: str) -> str:
    """The safe defined name for one variable, ignoring clashes.

    Valid names are returned unchanged; others become ``v_`` + the name with
    every illegal character replaced by ``_``, cut to 255 characters.

        >>> mangle("users"), mangle("cpu2"), mangle("TRUE"), mangle("r")
        ('users', 'v_cpu2', 'v_TRUE', 'v_r')
    """
    if is_valid_name(name):
        return name
    cleaned = re.sub(r"[^A-Za-z0-9_.]", "_", name)
    candidate = ("v_" + cleaned)[:MAX_NAME_LENGTH]
    return candidate


def mangle_all(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Map each variable name to a unique, valid defined name (deterministic).

    Valid names keep themselves and are reserved first; invalid ones get
    :func:`mangle` plus ``_2``, ``_3``... when that collides (case-insensitive)
    with a name already taken. Duplicate inputs map to the same name.
    """
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        if name not in out and is_valid_name(name) and name.upper() not in taken:
            out[name] = name
            taken.add(name.upper())
    for name in names:
        if name in out:
            continue
        base = mangle(name)
        candidate = base
        k = 2
        while candidate.upper() in taken or not is_valid_name(candidate):
            suffix = f"_{k}"
            candidate = base[: MAX_NAME_LENGTH - len(suffix)] + suffix
            k += 1
        out[name] = candidate
        taken.add(candidate.upper())
    return out
