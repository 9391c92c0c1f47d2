"""``concur list``: the shipped packs and catalogs.

``--json`` prints ``{"packs": [{"name", "path", "variables", "equations", "doc"}],
"catalogs": [{"name", "entries": [ID...]}]}`` (``doc``: the first sentence of the pack's doc).
"""

from __future__ import annotations

import json
from typing import Any

import click

from ..options import json_option

__all__ = ["command"]


def _first_sentence(doc: str) -> str:
    return " ".join(doc.split()).split(". ")[0]


@click.command(name="list")
@json_option
def command(as_json: bool) -> None:
    """List the shipped packs and catalogs."""
    from ...lang.library import catalog_names, get_catalog, get_pack, pack_paths
    from ..render import align, echo

    packs: list[dict[str, Any]] = []
    for name, _path in pack_paths().items():
        pack = get_pack(name)
        packs.append(
            {
                "name": name,
                "path": pack.path,
                "variables": len(pack.variables),
                "equations": len(pack.equations),
                "doc": _first_sentence(pack.doc),
            }
        )
    catalogs = [{"name": name, "entries": list(get_catalog(name).entries)} for name in catalog_names()]
    if as_json:
        click.echo(json.dumps({"packs": packs, "catalogs": catalogs}, indent=2))
        return
    rows = [
        (
            p["name"],
            f"{p['variables']} vars, {p['equations']} eqs",
            p["doc"] if len(p["doc"]) <= 78 else p["doc"][:77].rstrip() + "…",
        )
        for p in packs
    ]
    echo("packs:")
    for line in align(rows):
        echo("  " + line)
    echo("catalogs:")
    for cat in catalogs:
        echo(f"  {cat['name']}: {', '.join(cat['entries'])}")
