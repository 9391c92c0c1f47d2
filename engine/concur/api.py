"""The Python API: ``concur.solve`` and ``concur.load_model``.

    >>> import concur
    >>> sol = concur.solve(find="users", given={"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb",
    ...                    "tp": 4, "context": "8192 token", "overhead": "4 GiB", "mem_util": 0.9})
    >>> sol.value("users")
    55.0
"""

from __future__ import annotations

from typing import Any

from .errors import UnknownNameError
from .fixed import require_fixed
from .model import Model, build_model
from .solver import Solution, save_inverse_cache, solve_model

__all__ = ["solve", "load_model", "packs_for"]


def load_model(packs: Any = None) -> Model:
    if isinstance(packs, str):
        packs = [packs]
    return build_model(list(packs) if packs else None)


def packs_for(find: tuple[str, ...]) -> list[str]:
    """The shipped packs that declare every target, smallest first (used when no pack is named)."""
    from .library import pack_paths

    hits = []
    for name in pack_paths():
        model = build_model([name])
        if all(f in model.variables for f in find):
            hits.append((len(model.variables), name))
    if not hits:
        raise UnknownNameError(f"no pack declares {', '.join(find)}",
                               hint="'concur list' shows the packs; 'concur show PACK' their variables")
    hits.sort()
    return [hits[0][1]]


def solve(find: Any, given: dict[str, Any] | None = None, packs: Any = None, **_: Any) -> Solution:
    """Solve for ``find`` (a name, comma-separated names or a list). See :mod:`concur.solver`.

    Raises ``UnderdeterminedError`` for a throughput question that leaves input length, output
    length, offered load or configuration open (:func:`concur.fixed.require_fixed`).
    """
    if isinstance(find, str):
        find = [f.strip() for f in find.split(",") if f.strip()]
    find = tuple(find)
    if isinstance(packs, str):
        packs = [packs]
    model = build_model(list(packs) if packs else packs_for(find))
    require_fixed(model, set(given or {}), find)
    sol = solve_model(model, find, dict(given or {}))
    save_inverse_cache(model)
    from .units import save_cache

    save_cache()
    return sol
