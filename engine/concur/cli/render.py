"""Text for the terminal: escaping pack text, aligned rows, numbers with units, the solve table.

Text that comes from packs (docs, names, units, equations, messages quoting them) reaches the
terminal only through :func:`echo`, which escapes control and format characters
(:func:`printable`): a pack cannot move the cursor, clear the screen or reorder text to fake an
"ok". JSON output needs no escaping (``json.dumps`` escapes control characters itself).

:func:`render_table` reads a solution's ``results()``, ``trace``, ``model`` and ``notes``; it is
the one place that knows how a derivation is shown.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import click

__all__ = ["align", "echo", "fit_summary", "format_value", "printable", "render_table"]


_FIT = re.compile(
    r"^(?P<cell>[\w.-]+@[\w.-]+): (?P<how>.*?)(?: of tests/data/\S+ \(.*?\))?(?:, pulled towards .*?)?; "
    r"in-sample median \|error\| (?P<ins>[\d.]+%), leave-one-source-out (?P<cv>[\d.]+%) over its "
    r"(?P<n>\d+) points$"
)


def fit_summary(citation: str) -> str:
    """A fitted catalog constant's provenance in a phrase (``--explain``): which fit, on how many
    points, and its leave-one-source-out error; "" for a value cited to a document instead.

    >>> fit_summary("vllm@hopper: fit on 9 points of tests/data/t.yaml (ids a, b); in-sample median |error| "
    ...             "6.0%, leave-one-source-out 8.1% over its 9 points")
    'vllm@hopper fit on 9 points; leave-one-source-out error 8.1% (in-sample 6.0%)'
    """
    m = _FIT.match(" ".join(citation.split()))
    if m is None:
        return ""
    how = m.group("how").split(" (ids")[0]
    return f"{m.group('cell')} {how}; leave-one-source-out error {m.group('cv')} (in-sample {m.group('ins')})"


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with control and format characters escaped (``\\x1b``, ``\\u202e``).

    C0/C1 controls (ESC, CR, BEL, DEL...), Unicode format characters (bidi overrides,
    zero-width marks) and line/paragraph separators are shown as escapes, so text from a
    pack can neither drive the terminal nor disguise itself. ``newlines=True`` keeps ``\\n``.

    >>> printable("ok\\x1b[2J")
    'ok\\\\x1b[2J'
    """
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or (ch == "\n" and newlines) or unicodedata.category(ch) == "Zs":  # spaces are harmless
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def echo(text: str = "", *, err: bool = False) -> None:
    """Print ``text`` (lines kept, everything else :func:`printable`): the one way pack text is printed."""
    click.echo(printable(text, newlines=True), err=err)


def align(rows: list[tuple[str, str, str]]) -> list[str]:
    """Rows of (name, value, note): names left-aligned, values right-aligned, trailing spaces dropped."""
    if not rows:
        return []
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return [f"{a:<{w0}}  {b:>{w1}}  {c}".rstrip() for a, b, c in rows]


def format_value(value: Any, unit: str) -> str:
    """``55 user``, ``1,234.57 token/s``, ``0.0001234 s``: whole numbers with separators, else 6 digits.

    >>> format_value(81920.0, "B/token")
    '81,920 B/token'
    """
    if isinstance(value, str):
        return value
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        text = f"{int(value):,}"
    else:
        text = f"{value:,.6g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.4g}"
    return f"{text} {unit}".strip()


def render_table(sol: Any, explain: bool) -> str:
    """Aligned rows ``name  value unit  <- derivation``; with ``explain`` the whole trace."""
    rows: list[tuple[str, str, str]] = []
    by_var = {s.variable: s for s in sol.trace}
    for name, res in sol.results().items():
        step = by_var.get(name)
        how = ""
        if step is not None:
            if step.method in ("search", "integer tear"):
                how = step.note
            elif step.eq is not None:
                how = f"{sol.equation_text(step)}  [{sol.where(step)}]"
            else:
                how = str(step.method)
        rows.append((name, format_value(res["value"], res["unit"]), how))
    lines = align(rows)
    if explain:
        lines.append("")
        lines.append("derivation (in order):")
        steps = []
        for s in sol.trace:
            var = sol.model.variables[s.variable]
            value = var.choices[int(s.value)] if var.choices else s.value / var.display.factor
            detail = sol.equation_text(s) or s.note or str(s.method)
            if s.method in ("given", "preset", "default"):
                detail = s.note if s.method == "preset" and s.note else str(s.method)
                fit = fit_summary(sol.givens.citations.get(s.variable, "")) if s.method == "preset" else ""
                if fit:
                    detail += f"  ({fit})"
            elif s.note and s.note != detail:
                detail += f"  ({s.note})"
            steps.append((f"  {s.variable}", format_value(value, var.display.text), detail))
        lines.extend(align(steps))
    shown = {r[2] for r in rows}
    for note in sol.notes:
        if note not in shown:
            lines.append(f"note: {note}")
    return "\n".join(lines)
