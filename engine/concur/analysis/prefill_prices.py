"""Whose price a disaggregated row's prefill pool pays when it runs on another GPU type (``concur plan
--prefill-gpus``).

How it is designed, and why
---------------------------
A price the user gives is the price of one GPU type: ``gpu_hour_price`` is the decode GPU's, and a
prefill pool of that same type pays it too (what llm_disagg's ``prefill_gpu`` preset does when it
falls back to ``gpu``). It cannot silently price another GPU type, and mixing it silently with a list
price would mislead as much, so a prefill pool on another type than its row's decode GPU pays

* ``prefill_gpu_hour_price`` when the question gives it (one GPU type's price: a plan whose prefill
  pools run on two or more types beside a decode GPU of another type is refused, as is one where it
  would price no pool at all);
* else the list price of the provider the plan prices at, and a note says so, naming each such GPU
  and its price (or that it has none, so those rows stay unpriced until it is given).

Invariants: a plan without ``prefill_gpu_hour_price`` and without ``gpu_hour_price`` prices every
pool at its list price, as before; the refusals are :class:`UsageError` with ``variable``
``prefill_gpu_hour_price`` and a ``kind`` the CLI words (no option text here).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from ..errors import UsageError
from .disagg_plan import given_prefill_price
from .providers import default_provider

__all__ = ["cross_gpus", "prefill_price_notes", "price_prefill_pools"]

_NAME = "prefill_gpu_hour_price"


def cross_gpus(gpus: Sequence[str], prefill_gpus: Sequence[str]) -> list[str]:
    """The prefill GPUs of ``prefill_gpus`` some row runs beside a decode GPU of ``gpus`` of another type."""
    return sorted({p for p in prefill_gpus for g in gpus if p != g})


def price_prefill_pools(
    link_question: Mapping[str, Any],
    gpus: Sequence[str],
    prefill_gpus: Sequence[str],
    prefill: MutableMapping[tuple[str, str], dict[str, float]],
) -> None:
    """Set the given ``prefill_gpu_hour_price`` (if any) as the price of every prefill GPU in ``prefill``
    (values per (prefill GPU, provider), :func:`concur.analysis.disagg_plan.prefill_gpu_values`);
    a prefill pool of its row's decode GPU type never reads these (it pays the decode GPU's price).
    Raises :class:`UsageError` when the price would price no pool, or more than one GPU type."""
    own = given_prefill_price(link_question)
    if own is None:
        return
    cross = cross_gpus(gpus, prefill_gpus)
    if not cross:
        raise UsageError(
            f"{_NAME} prices a prefill pool on another GPU type than its decode pool's, and the plan has none",
            variable=_NAME,
            hint=f"plan a prefill pool on a GPU type other than the decode GPU's, or drop {_NAME}",
            kind="prefill_price_unused",
        )
    if len(cross) > 1:
        raise UsageError(
            f"{_NAME} is the price of one GPU type, and the plan runs prefill pools on {', '.join(cross)} "
            "beside decode pools of another type",
            variable=_NAME,
            hint=f"plan one prefill GPU type beside the decode GPUs, or drop {_NAME} to price each at its list price",
            kind="prefill_price_types",
        )
    for values in prefill.values():
        values[_NAME] = own


def prefill_price_notes(
    question: Mapping[str, Any],
    link_question: Mapping[str, Any],
    gpus: Sequence[str],
    prefill_gpus: Sequence[str],
    prefill: Mapping[tuple[str, str], Mapping[str, float]],
) -> list[str]:
    """What prices the prefill pools on another GPU type: the given ``prefill_gpu_hour_price``, or, when
    ``gpu_hour_price`` is given without it, each such GPU's list price (named, with its price), so
    the reader knows that the two pools of a row are priced from two sources."""
    cross = cross_gpus(gpus, prefill_gpus)
    if not cross:
        return []
    own = given_prefill_price(link_question)
    if own is not None:
        return [f"prefill pools on {cross[0]} are priced at the given {_NAME} (${own * 3600:,.2f}/GPU-hour)"]
    if "gpu_hour_price" not in question:
        return []
    provider = default_provider()
    prices = {gpu: prefill.get((gpu, ""), {}).get(_NAME) for gpu in cross}
    priced = [f"{gpu} (${p * 3600:,.2f}/GPU-hour)" for gpu, p in prices.items() if p is not None]
    unpriced = [gpu for gpu, p in prices.items() if p is None]
    text = "gpu_hour_price prices the decode GPUs and the prefill pools of their type, not another GPU type"
    if priced:
        text += f": prefill pools on {', '.join(priced)} are at {provider}'s on-demand list price"
    if unpriced:
        text += (
            f"{'; ' if priced else ': '}{', '.join(unpriced)} has no list price at {provider}, so its rows are unpriced"
        )
    return [f"{text} (give {_NAME}=... for your own)"]
