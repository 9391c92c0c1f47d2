"""How a value someone typed becomes a base-unit float: one rule, used everywhere.

How it is designed, and why
---------------------------
A capacity tool is trusted until its first silent wrong answer, and the classic one is a bare
number read in the wrong unit: ``--set t_step=30`` meant 30 ms (what ``concur show`` prints for
``t_step``) but was read as 30 s, and the fleet came out a thousand times too large. So a value
means the same thing wherever it is typed -- ``--set``, ``--over``, a scenario file, a pack's
``default:``/``bounds:``/``examples:``, :func:`concur.solve` and a workbook's input cells:

* **a bare number is in the variable's display unit** -- the unit ``concur show`` prints and the
  unit of the result table (``t_step=30`` is 30 ms, ``params=70`` is 70 Gparameter);
* **a number with a unit must have the variable's dimension exactly**, with one allowance: a
  *count* unit (token, request, user, gpu, replica, ...) that the text leaves out entirely is
  implied. ``"8192 token"`` for ``context`` (token/user) means 8,192 token per user, and
  ``"300/hour"`` or ``"300 per hour"`` for ``arrival_rate`` (request/s) means 300 request/hour.
  A count that *is* written must have the right exponent: ``"8192 token**2"`` and
  ``"8192 token*user"`` are refused, as is ``"4 GiB"`` for a time;
* ``k``/``M``/``G`` glued to the number are decimal (``8k`` = 8,000) and ``Ki``/``Mi``/``Gi``
  binary (``8Ki`` = 8,192); a token count given with a decimal multiplier earns a note, since
  8k context usually means 8,192 (:func:`prefix_note`);
* digits group with ``_`` or a comma between groups of three (``1,000,000``); a decimal comma
  is refused (``"0,5 GiB"`` is not 5 GiB);
* a pint ``Quantity`` (from the Python API) is read through its magnitude and unit text.

Worked example: ``littles_law`` declares ``t_step`` in s and displays it in ms. ``30``, ``"30"``,
``"30 ms"`` and ``"0.03 s"`` all give 0.03 (s, the base unit); ``"30 token"`` is refused
(exit 2) with "expected ms".

Non-goals: currency conversion (``usd`` is a dimension of its own), offset units (refused by
:mod:`concur.lang.units`), guessing a unit from the magnitude.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from ..errors import Location, PackError, UnitError
from .units import COUNT_DIMENSIONS, UnitInfo, decimal_multiplier, format_dims, parse_quantity

__all__ = ["convert_value", "count_factor", "prefix_note", "value_text"]


class Variable(Protocol):
    """What a value is read for: a declared variable's name, base and display units, and choices
    (:class:`concur.lang.pack.Variable` is one; this module sits below the pack loader)."""

    @property
    def name(self) -> str: ...
    @property
    def unit(self) -> UnitInfo: ...
    @property
    def display(self) -> UnitInfo: ...
    @property
    def choices(self) -> tuple[str, ...]: ...


def convert_value(raw: Any, var: Variable, where: Location | None = None) -> float:
    """``raw`` (a number in the display unit, ``"8192 token"``, a choice name or a pint Quantity)
    as a base-unit float for ``var``. Raises :class:`PackError`/:class:`UnitError`."""
    if var.choices:
        if isinstance(raw, str) and raw in var.choices:
            return float(var.choices.index(raw))
        raise PackError(f"'{raw}' is not one of {', '.join(var.choices)}", where=where, variable=var.name)
    if isinstance(raw, bool):
        raise PackError(f"{raw!r} is not a number", where=where, variable=var.name)
    if hasattr(raw, "magnitude") and hasattr(raw, "units"):  # a pint Quantity
        raw = f"{float(raw.magnitude)!r} {raw.units}"
    if isinstance(raw, (int, float)):
        if not math.isfinite(float(raw)):
            raise PackError(f"{raw!r} is not a finite number", where=where, variable=var.name)
        return float(raw) * var.display.factor
    if not isinstance(raw, str):
        raise PackError(f"{raw!r} is not a number or a 'number unit' text", where=where, variable=var.name)
    try:
        number, info = parse_quantity(raw, variable=var.name)
    except ValueError as exc:
        raise PackError(str(exc), where=where, variable=var.name) from None
    if info.text == "":
        return number * var.display.factor
    return number * info.factor * count_factor(info, var, where, given=raw)


def count_factor(info: UnitInfo, var: Variable, where: Location | None = None, *, given: str | None = None) -> float:
    """1.0 when ``info`` fits ``var``'s unit, counting omitted count units as implied; else raises.

    The factor is always 1 because every count dimension has base factor 1; the function exists
    to refuse what does not fit (see the module essay), with the expected unit in the message.
    """
    if info.dims == var.unit.dims:
        return 1.0
    declared = dict(var.unit.dims)
    got = dict(info.dims)
    for dim in set(declared) | set(got):
        want, have = declared.get(dim, 0.0), got.get(dim, 0.0)
        if abs(want - have) <= 1e-12:
            continue
        if dim in COUNT_DIMENSIONS and abs(have) <= 1e-12:
            continue  # a count the text leaves out is implied ("8192 token" for token/user)
        shown = given if given is not None else info.text
        raise UnitError(
            f"'{shown}' does not fit {var.name}: '{info.text}' is {format_dims(info.dims)}, "
            f"{var.name} is '{var.unit.text}' ({format_dims(var.unit.dims)})",
            where=where,
            variable=var.name,
            hint=f"give it in {var.display.text or 'a plain number'}"
            + (f" (a bare number means {var.display.text})" if var.display.text else ""),
        )
    return 1.0


def prefix_note(raw: Any, var: Variable, base: float) -> str | None:
    """A note when a token count was typed with a decimal multiplier (``"8k"`` = 8,000, not 8,192)."""
    if not isinstance(raw, str) or "[token]" not in dict(var.unit.dims):
        return None
    mult = decimal_multiplier(raw)
    if mult is None:
        return None
    shown = base / var.display.factor
    binary = shown / 1000 ** {"k": 1, "K": 1, "M": 2, "G": 3}[mult] * 1024 ** {"k": 1, "K": 1, "M": 2, "G": 3}[mult]
    return (
        f"{var.name} = {shown:,.6g} {var.display.text} (from '{raw.strip()}'; "
        f"{raw.strip().split()[0].replace(mult, mult.upper() + 'i')} = {binary:,.6g})"
    )


def value_text(var: Variable, base: float) -> str:
    """``base`` shown in ``var``'s display unit, as a text ``convert_value`` reads back exactly."""
    if var.choices:
        return var.choices[int(base)]
    value = base / var.display.factor
    return f"{value!r} {var.display.text}".strip()
