"""``concur show PACK``: a pack's variables (the unit a bare number means), equations and presets.

The unit shown for a variable is its *display* unit: the unit a bare number typed for it is read
in (``--set``, ``--over``, scenarios, the API) and the unit of the result table.

``--json`` prints ``{"pack", "doc", "uses", "variables": {NAME: {"unit", "choices", "default",
"bounds", "integer", "limit", "doc", "pack", "where"}}, "equations": [{"text", "doc", "where"}],
"constraints": [{"text", "doc", "where"}], "presets": {KEY: {"catalog", "fields"}}}``; bounds are
in the display unit, ``null`` for an open end.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import click

from ..options import json_option, pack_path_option

__all__ = ["command", "pack_document"]


def _display(var: Any, base: float | None) -> float | None:
    return None if base is None else base / var.display.factor


def pack_document(model: Any) -> dict[str, Any]:
    """The ``--json`` document of a model whose first pack is the one shown."""
    top = model.packs[0]
    variables = {}
    for name, var in model.variables.items():
        variables[name] = {
            "unit": None if var.choices else var.display.text,
            "choices": list(var.choices) or None,
            "default": var.default_text,
            "bounds": [_display(var, b) for b in var.bounds] if any(b is not None for b in var.bounds) else None,
            "integer": var.integer,
            "limit": var.limit,
            "doc": var.doc,
            "pack": var.pack,
            "where": str(var.where),
        }
    return {
        "pack": top.name,
        "doc": " ".join(top.doc.split()),
        "uses": [u for u, _ in top.uses],
        "variables": variables,
        "equations": [{"text": eq.text, "doc": eq.doc, "where": str(eq.where)} for eq in model.equations],
        "constraints": [{"text": c.text, "doc": c.doc, "where": str(c.where)} for c in model.constraints],
        "presets": {
            k: {
                "catalog": chain[0].catalog,
                "catalogs": [p.catalog for p in chain],
                "fields": {f: v for p in chain for f, v in p.fields.items()},
            }
            for k, chain in model.presets.items()
        },
    }


@click.command(name="show")
@pack_path_option
@click.argument("pack")
@json_option
def command(pack: str, as_json: bool) -> None:
    """Show a pack: its variables (unit, default, doc), equations and presets.

    The unit shown is the one a bare number means for that variable (--set, --over, scenarios).
    """
    from ...lang.model import build_model
    from ..render import align, echo, printable

    model = build_model([pack])
    if as_json:
        click.echo(json.dumps(pack_document(model), indent=2))
        return
    top = model.packs[0]
    echo(textwrap.fill(printable(f"{top.name}: {' '.join(top.doc.split())}"), width=100, subsequent_indent="  "))
    if top.uses:
        echo(f"uses: {', '.join(u for u, _ in top.uses)}")
    echo("\nvariables:")
    rows = []
    for name, var in model.variables.items():
        unit = "|".join(var.choices) if var.choices else (var.display.text or "-")
        extra = []
        if var.default_text is not None:
            extra.append(f"default {var.default_text}")
        if var.integer:
            extra.append("integer")
        if var.limit:
            extra.append(var.limit.replace("_", " ") + " when given")
        rows.append((f"  {name}", unit, (var.doc + (f" ({'; '.join(extra)})" if extra else "")).strip()))
    for line in align(rows):
        echo(line)
    echo("\nequations:")
    for eq in model.equations:
        echo(f"  {eq.text}    [{eq.where}]")
    if model.constraints:
        echo("\nconstraints:")
        for con in model.constraints:
            echo(f"  {con.text}    ({con.doc})")
    if model.presets:
        echo("\npresets: " + ", ".join(f"{k}=<{chain[0].catalog} id>" for k, chain in model.presets.items()))
