"""Closed forms by inversion: sympy solves an equation for one variable once, on disk after that.

The inverted forms are cached as expression trees keyed by the packs' content (``Model.key``),
the equation and the variable, so a warm run never imports sympy. Equations whose variable sits
inside floor/ceil/erlang/% or a comparison are never inverted (the solver searches instead).
"""

from __future__ import annotations

from ..cache import cache_dir, read_json, write_json
from ..lang.expr import Call, Cmp, Node, names_in, to_text, walk
from ..lang.functions import FUNCTIONS
from ..lang.model import Model
from ..lang.serial import decode_inverses, encode_inverses
from .problem import SpecialisedEq

__all__ = ["symbolic_inverse", "save_inverse_cache", "smooth_in"]


_INVERSE_CACHE: dict[tuple[str, str, str], list[Node]] | None = None
_INVERSE_DIRTY = False


def _inverse_cache_path(model: Model) -> str:
    return str(cache_dir() / f"inverse-{model.key}.json")


def _inverse_cache(model: Model) -> dict[tuple[str, str, str], list[Node]]:
    global _INVERSE_CACHE
    if _INVERSE_CACHE is None:
        _INVERSE_CACHE = {}
        data = read_json(_inverse_cache_path(model), "inverse", decode_inverses)
        if data:
            _INVERSE_CACHE.update(data)
    return _INVERSE_CACHE


def save_inverse_cache(model: Model) -> None:
    global _INVERSE_DIRTY
    if not _INVERSE_DIRTY or _INVERSE_CACHE is None:
        return
    if write_json(_inverse_cache_path(model), "inverse", encode_inverses(_INVERSE_CACHE)):
        _INVERSE_DIRTY = False


def smooth_in(node: Node, var: str) -> bool:
    """False when ``var`` sits inside floor/ceil/erlang/% (the solver will not invert through those)."""
    for n in walk(node):
        if isinstance(n, Call) and not FUNCTIONS[n.fn].smooth and var in names_in(n):
            return False
        if isinstance(n, Cmp) and var in names_in(n):
            return False
        if getattr(n, "op", None) == "%" and var in names_in(n):
            return False
    return True


def symbolic_inverse(model: Model, e: SpecialisedEq, var: str) -> list[Node]:
    """Closed forms of ``var`` from ``e`` (cached); [] when sympy finds none."""
    global _INVERSE_DIRTY
    key = (model.key, e.eq.key + "|" + to_text(e.lhs) + "=" + to_text(e.rhs), var)
    cache = _inverse_cache(model)
    if key in cache:
        return cache[key]
    import sympy as sp

    from .symbolic import from_sympy, to_sympy

    symbols = {n: sp.Symbol(n, positive=True) for n in e.names}
    symbols[var] = sp.Symbol(var, real=True)
    expr = to_sympy(e.lhs, symbols) - to_sympy(e.rhs, symbols)
    expr = expr.rewrite(sp.Piecewise) if expr.has(sp.Max, sp.Min) else expr
    out: list[Node] = []
    try:
        roots = sp.solve(expr, symbols[var], dict=False, check=False, rational=False)
        for r in roots if isinstance(roots, list) else []:
            try:
                out.append(from_sympy(r))
            except TypeError:
                continue
    except Exception:  # noqa: BLE001 -- sympy raises anything (RecursionError included) on odd inputs
        out = []
    cache[key] = out
    _INVERSE_DIRTY = True
    return out
