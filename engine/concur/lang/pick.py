"""Which column of a ``pick`` catalog a question chose: the price list's provider.

A catalog with ``pick: {by, sets, default}`` (``catalogs/prices.yaml``: by ``provider``, sets
``gpu_hour_price``, default ``aws``) holds one field per alternative -- one provider per
column. A question chooses the column with the given named ``by`` (``--set provider=lambda``)
or takes the catalog's default, and the chosen entry's value in that column fills ``sets``.

Invariants: the column is always a declared field of the catalog (an unknown one is a usage
error naming the known ones); an entry without the column fills nothing -- a price is never
taken from another provider's column, so two providers' prices are never mixed silently.

    >>> from concur.lang.library import get_catalog
    >>> prices = get_catalog("prices")
    >>> picked_field(prices, {}), picked_field(prices, {"provider": "lambda"})
    ('aws', 'lambda')
    >>> listed_by(prices, "h100-pcie-80gb")
    ['lambda', 'runpod']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import UnknownNameError
from .pack import Catalog

__all__ = ["listed_by", "picked_field"]


def picked_field(catalog: Catalog, given: Mapping[str, Any]) -> str:
    """The column ``given`` chose (its ``pick.by`` value) or the catalog's default.

    Raises UnknownNameError for a value that is not a field of the catalog."""
    pick = catalog.pick
    if pick is None:
        raise ValueError(f"catalog {catalog.name} has no pick")
    raw = given.get(pick.by)
    if raw is None:
        return pick.default
    name = str(raw).strip()
    if name not in catalog.fields:
        raise UnknownNameError(
            f"unknown {pick.by} '{name}'",
            variable=pick.by,
            hint=f"known: {', '.join(catalog.fields)} (catalogs/{catalog.name}.yaml)",
        )
    return name


def listed_by(catalog: Catalog, entry_id: str) -> list[str]:
    """The columns (providers) that list ``entry_id``, in the catalog's field order."""
    entry = catalog.entries.get(entry_id)
    return [] if entry is None else [f for f in catalog.fields if f in entry.values]
