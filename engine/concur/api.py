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
from .solver.throughput_inputs import require_fixed
from .lang.model import Model, build_model
from .solver.question import Solution, save_inverse_cache, solve_model

__all__ = ["solve", "load_model", "packs_for"]


def load_model(packs: Any = None) -> Model:
    if isinstance(packs, str):
        packs = [packs]
    return build_model(list(packs) if packs else None)


def packs_for(find: tuple[str, ...]) -> list[str]:
    """Shipped packs that declare the targets: the smallest single pack declaring all of them,
    else, greedily, the smallest pack for each target not yet covered (used when no pack is named)."""
    from .lang.library import pack_paths

    declared: list[tuple[int, str, set[str]]] = []
    for name in pack_paths():
        model = build_model([name])
        declared.append((len(model.variables), name, set(model.variables)))
    declared.sort()
    for _, name, names in declared:
        if set(find) <= names:
            return [name]
    chosen: list[str] = []
    covered: set[str] = set()
    for target in find:
        if target in covered:
            continue
        hit = next(((name, names) for _, name, names in declared if target in names), None)
        if hit is None:
            raise UnknownNameError(f"no pack declares '{target}'",
                                   hint="'concur list' shows the packs; 'concur show PACK' their variables")
        chosen.append(hit[0])
        covered |= hit[1]
    return chosen


def solve(find: Any, given: dict[str, Any] | None = None, packs: Any = None, **_: Any) -> Solution:
    """Solve for ``find`` (a name, comma-separated names or a list). See :mod:`concur.solver.question`.

    Raises ``UnderdeterminedError`` for a throughput question that leaves input length, output
    length, offered load or configuration open (:func:`concur.solver.throughput_inputs.require_fixed`).
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
    from .lang.units import save_cache

    save_cache()
    return sol
