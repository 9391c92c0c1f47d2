"""HTML tables for notebooks: what ``Solution._repr_html_`` and ``FleetPlan._repr_html_`` return.

Jupyter shows an object's ``_repr_html_()``; concur's answers render as a plain table with a
caption and notes. Every piece of text -- names, units, equations and notes come from packs --
is escaped (:func:`html.escape`), so a pack cannot inject markup into a notebook.

    >>> html_table(["name", "value"], [["users", "55 user"]], caption="llm_memory")
    '<table><caption>llm_memory</caption><thead><tr><th>name</th><th>value</th></tr></thead><tbody><tr><td>users</td><td>55 user</td></tr></tbody></table>'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def escape(text: str) -> str:
    """``text`` with ``& < > " '`` escaped, as :func:`html.escape` does (that module's import loads a
    table of 2,000 named entities that a solve never needs)."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#x27;")
    )


__all__ = ["html_number", "html_table"]


def html_number(value: object, unit: str = "") -> str:
    """``3 replica``, ``60,268.8 usd/month``: whole numbers with separators, else 6 significant digits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = "-" if value is None else str(value)
    elif float(value).is_integer() and abs(value) < 1e15:
        text = f"{int(value):,}"
    else:
        text = f"{value:,.6g}"
    return f"{text} {unit}".strip()


def html_table(
    head: Sequence[str], rows: Iterable[Sequence[object]], *, caption: str = "", notes: Iterable[str] = ()
) -> str:
    """A ``<table>`` of ``rows`` under ``head`` (every cell escaped), then ``notes`` (escaped) as a list."""
    parts = ["<table>"]
    if caption:
        parts.append(f"<caption>{escape(caption)}</caption>")
    parts.append("<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr></thead><tbody>")
    for row in rows:
        parts.append("<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>")
    parts.append("</tbody></table>")
    shown = [f"<li>{escape(n)}</li>" for n in notes]
    if shown:
        parts.append("<ul>" + "".join(shown) + "</ul>")
    return "".join(parts)
