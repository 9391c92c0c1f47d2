"""The Python API: ``concur.solve`` and ``concur.load_model``.

    >>> import concur
    >>> sol = concur.solve(find="users", given={"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb",
    ...                    "tp": 4, "context": "8192 token", "overhead": "4 GiB", "mem_util": 0.9})
    >>> sol.value("users")
    55.0
    >>> sol["kv_per_token"]
    <Quantity(81920.0, 'byte / token')>

Values follow the one rule of :mod:`concur.lang.values`: a bare number is in the variable's
display unit (``concur show PACK`` prints it), a text carries its unit (``"8192 token"``), and
a pint ``Quantity`` is converted. The result is a :class:`concur.solver.solution.Solution`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .errors import UnknownNameError, UsageError
from .lang.model import Model, build_model
from .solver.question import solve_model
from .solver.solution import Solution

__all__ = ["solve", "load_model", "packs_for"]


def load_model(packs: str | Iterable[str] | None = None) -> Model:
    """The model of the packs named (names or paths; every shipped pack when None)."""
    if isinstance(packs, str):
        packs = [packs]
    return build_model(list(packs) if packs else None)


def packs_for(find: tuple[str, ...]) -> list[str]:
    """Shipped packs that declare the targets: the smallest single pack declaring all of them,
    else, greedily, the smallest pack for each target not yet covered (used when no pack is named)."""
    from .lang.model import pack_index

    declared = sorted((len(names), name, names) for name, names in pack_index().items())
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


def targets_of(find: str | Iterable[str]) -> tuple[str, ...]:
    """``"a,b"`` or ``["a", "b"]`` as a tuple of names; refuses an empty question."""
    names = [f.strip() for f in find.split(",")] if isinstance(find, str) else [str(f).strip() for f in find]
    names = [n for n in names if n]
    if not names:
        raise UsageError("nothing to solve for", hint="name at least one variable to find")
    return tuple(names)


def solve(find: str | Iterable[str], given: Mapping[str, Any] | None = None,
          packs: str | Iterable[str] | None = None) -> Solution:
    """Solve for ``find`` (a name, ``"a,b"`` or a list) from ``given`` over ``packs``.

    ``packs``: names or paths; by default the smallest shipped pack(s) declaring the targets.
    ``given`` maps variable or preset names to values (see the module docstring).
    Raises a :class:`concur.errors.ConcurError` (the CLI's exit code is ``err.exit_code``).
    """
    targets = targets_of(find)
    model = load_model(packs) if packs else build_model(packs_for(targets))
    return solve_model(model, targets, dict(given or {}))
