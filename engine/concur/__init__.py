"""concur: unit-checked capacity equations solved for whichever variable is unknown.

    >>> import concur
    >>> sol = concur.solve(find="users", given={"model": "llama-3.1-70b",
    ...     "gpu": "h100-sxm-80gb", "tp": 4, "context": "8192 token"})
    >>> sol["users"]
    <Quantity(55.0, 'user')>

Heavy dependencies (sympy, pint, openpyxl) are imported only when needed.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "load_model", "solve"]


def solve(find: Any, given: dict[str, Any] | None = None, packs: Any = None) -> Any:
    """Solve the packs in play for ``find`` (a name, ``"a,b"`` or a list of names) from ``given``.

    ``given`` maps variable or preset names to numbers (in the unit ``concur show`` prints for the
    variable), strings with units (``"8192 token"``), pint Quantities or preset ids. Returns a
    :class:`concur.solver.solution.Solution`; raises a :class:`concur.errors.ConcurError`.
    """
    from .api import solve as _solve

    return _solve(find=find, given=given, packs=packs)


def load_model(packs: Any = None) -> Any:
    """Load packs (names or paths; all shipped packs when None) into a Model."""
    from .api import load_model as _load

    return _load(packs)
