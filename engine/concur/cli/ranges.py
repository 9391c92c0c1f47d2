"""``--over`` words: ``VAR=START..STOP[:N]`` or ``VAR=a,b,c``, read into a variable and its values.

The command line's syntax for a swept axis (``concur sweep --over``, and the web page's sweep form,
which builds the same words); the sweep itself takes numbers (:mod:`concur.sweep.vector`).
Invariants: a range has at most :data:`concur.sweep.vector.MAX_POINTS` points; every problem is a
:class:`concur.errors.UsageError` (exit 2) quoting the words.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import UsageError
from ..sweep.vector import MAX_POINTS

__all__ = ["parse_range"]


def parse_range(text: str, flag: str = "--over") -> tuple[str, list[Any], bool]:
    """``VAR=START..STOP[:N]`` or ``VAR=a,b,c`` -> (name, values, is_range).

    Ranges give N points (default 10) linearly spaced; the caller may space them
    logarithmically. Non-numeric list items stay strings (presets, choices); nan and inf are
    refused. ``flag`` names the option in messages (``--compare`` reads lists the same way).

    >>> parse_range("concurrency=1..8:4")
    ('concurrency', [1.0, 8.0, 4], True)
    >>> parse_range("tp=1,2,4")
    ('tp', [1.0, 2.0, 4.0], False)
    """
    if "=" not in text:
        raise UsageError(
            f"{flag} '{text}' is not VAR=START..STOP[:N] or VAR=a,b,c", hint="e.g. --over concurrency=1..256:20 --log"
        )
    name, spec = (s.strip() for s in text.split("=", 1))
    if not name or not spec:
        raise UsageError(f"{flag} '{text}' needs a variable and values")
    if ".." in spec:
        body, _, count = spec.partition(":")
        lo, _, hi = body.partition("..")
        try:
            start, stop = float(lo), float(hi)
            n = int(count) if count else 10
        except ValueError:
            raise UsageError(
                f"{flag} '{text}': START, STOP must be numbers and N a whole number", hint="e.g. concurrency=1..256:20"
            ) from None
        if n < 1 or n > MAX_POINTS:
            raise UsageError(f"{flag} '{text}': N must be between 1 and {MAX_POINTS:,}, got {n:,}")
        _finite(f"{flag} '{text}'", start, stop)
        return name, [start, stop, n], True
    values: list[Any] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        try:
            values.append(float(item.replace("_", "")))
        except ValueError:
            values.append(item)
    _finite(f"{flag} '{text}'", *(v for v in values if isinstance(v, float)))
    if not values:
        raise UsageError(f"{flag} '{text}' lists no values")
    return name, values, False


def _finite(words: str, *numbers: float) -> None:
    """Refuse nan and inf as --set does: ``1..inf`` spaced nothing (numpy warned, every point nan)
    and ``5,inf,7`` gave a silent nan row."""
    for x in numbers:
        if not math.isfinite(x):
            raise UsageError(
                f"{words}: {x:g} is not a finite number", hint="give finite values, e.g. concurrency=1..256:20"
            )
