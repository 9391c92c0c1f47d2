"""Which provider's list prices a plan compares: one by default, every one only when asked.

The price catalog (``catalogs/prices.yaml``) holds one column per provider and names a default
(its ``pick.default``). A plan prices every configuration at one provider -- the default, or
``--provider NAME`` -- so its ranking never sets one provider's price against another's
without saying so; ``--provider all`` is the explicit request to compare across providers,
and then every row carries its provider. A GPU the chosen provider does not list is rejected
with the reason ``no list price at PROVIDER``, unless the question gives its own
``gpu_hour_price`` (then every row is priced at that price and the provider is only a label).

    >>> plan_providers(None), plan_providers("lambda")
    (['aws'], ['lambda'])
    >>> plan_providers("all")
    ['aws', 'azure', 'coreweave', 'lambda', 'runpod']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..lang.library import get_catalog
from ..lang.pick import listed_by, picked_field

__all__ = ["ALL", "default_provider", "listed_at", "plan_providers", "provider_note"]

ALL = "all"  # --provider all: every provider of the catalog, each row labelled
_CATALOG = "prices"


def default_provider() -> str:
    """The provider the price catalog states as its default."""
    return picked_field(get_catalog(_CATALOG), {})


def plan_providers(choice: str | None) -> list[str]:
    """The providers a plan prices at: the default (None), every one (``all``), or the one named
    (UnknownNameError naming the known ones otherwise)."""
    catalog = get_catalog(_CATALOG)
    if choice is None:
        return [default_provider()]
    if choice.strip() == ALL:
        return list(catalog.fields)
    return [picked_field(catalog, {"provider": choice})]


def listed_at(gpu: str, provider: str) -> bool:
    """Whether ``provider`` lists a price for ``gpu``."""
    return provider in listed_by(get_catalog(_CATALOG), gpu)


def provider_note(providers: Sequence[str], question: Mapping[str, Any], cross: bool = False) -> str:
    """The note a plan prints about whose prices it compared (``cross``: some disaggregated row runs its
    prefill pool on another GPU type, which a given ``gpu_hour_price`` does not price)."""
    if "gpu_hour_price" in question:
        if cross:
            return (
                "every row is priced at the given gpu_hour_price, not at a provider's list price, except a "
                "prefill pool on another GPU type than its decode pool's (see below)"
            )
        return "every row is priced at the given gpu_hour_price, not at a provider's list price"
    if len(providers) > 1:
        return (
            f"--provider {ALL}: each row is priced at its own provider's on-demand list price "
            f"({', '.join(providers)}); the ranking compares providers"
        )
    only = providers[0] if providers else default_provider()
    which = "the price catalog's default" if only == default_provider() else "--provider"
    return (
        f"prices are {only}'s on-demand list prices ({which}; --provider NAME for another, "
        f"--provider {ALL} to compare providers); GPUs {only} does not list are rejected"
    )
