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

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .errors import ConcurError, UnderdeterminedError, UnknownNameError, UsageError
from .lang.index import shipped_index
from .lang.model import Model, build_model
from .solver.givens import resolve_givens
from .solver.missing import narrow_missing
from .solver.plan import structure
from .solver.question import solve_model
from .solver.solution import Solution

__all__ = ["load_model", "packs_for", "solve"]


def load_model(packs: str | Iterable[str] | None = None) -> Model:
    """The model of the packs named (names or paths; every shipped pack when None)."""
    if isinstance(packs, str):
        packs = [packs]
    return build_model(list(packs) if packs else None)


def packs_for(
    find: tuple[str, ...],
    given: Mapping[str, Any] | None = None,
    scenario_for: Callable[[str], Mapping[str, Any]] | None = None,
) -> list[str]:
    """Shipped packs for a question that names none.

    Candidates declare every target and every given name (presets included); those that list a
    target under ``answers:`` (``llm_fleet`` answers replicas) come first, then the smaller ones.
    The first candidate whose equations determine the targets from the givens wins -- with
    ``scenario_for``, from that pack's embedded scenario plus the givens. When none does, the
    first candidate (its refusal names what is missing); when no single pack declares everything,
    greedily the smallest pack for each target not yet covered.

    What each pack declares comes from the shipped index (:mod:`concur.lang.index`), so only the
    candidates tried are parsed; a stale index means building every shipped model instead.
    """
    given = dict(given or {})
    index = shipped_index()
    refuse_unknown_names(find, tuple(given), index)
    need = set(find) | set(given)
    candidates = [
        name
        for _, _, name in sorted(
            (not (set(find) & answers), len(names), name) for name, (names, answers) in index.items() if need <= names
        )
    ]
    for name in candidates:
        scenario = {k: v for k, v in (scenario_for(name) if scenario_for else {}).items() if k not in find}
        if _determines(name, find, {**scenario, **given}):
            return [name]
    if candidates:
        return [candidates[0]]
    declared = sorted((len(names), name, names) for name, (names, _answers) in index.items())
    chosen: list[str] = []
    covered: set[str] = set()
    for target in find:
        if target in covered:
            continue
        found = next(((name, names) for _, name, names in declared if target in names), None)
        if found is None:  # refuse_unknown_names has named every undeclared name; kept for a stale index
            raise UnknownNameError(
                f"no pack declares '{target}'", hint="'concur list' shows the packs; 'concur show PACK' their variables"
            )
        chosen.append(found[0])
        covered |= found[1]
    return chosen


def refuse_unknown_names(
    find: Iterable[str], given: Iterable[str], index: Mapping[str, tuple[frozenset[str], frozenset[str]]]
) -> None:
    """Refuse the first asked-for or given name that no shipped pack declares, naming it with a
    did-you-mean (case-insensitive) over the packs that declare the other names of the question
    (the packs in play), else over every shipped name: a typo is named, never blamed on another
    name (``--set arival_rate=30`` once said "unknown variable 'model' in pack(s) littles_law")."""
    declared = frozenset().union(*(names for names, _ in index.values()))
    find, given = tuple(find), tuple(given)
    if all(name in declared for name in (*find, *given)):
        return
    import difflib

    known = [n for n in (*find, *given) if n in declared]
    in_play = [names for names, _ in index.values() if known and set(known) <= names]
    pool = sorted(frozenset().union(*in_play)) if in_play else sorted(declared)
    for name in (*find, *given):
        if name in declared:
            continue
        lower = {n.lower(): n for n in pool}
        close = [lower[c] for c in difflib.get_close_matches(name.lower(), list(lower), n=3, cutoff=0.6)]
        if not close and in_play:
            lower = {n.lower(): n for n in sorted(declared)}
            close = [lower[c] for c in difflib.get_close_matches(name.lower(), list(lower), n=3, cutoff=0.6)]
        raise UnknownNameError(
            f"unknown variable '{name}': no shipped pack declares it",
            variable=name,
            hint=(f"did you mean {', '.join(close)}?" if close else "")
            + (" " if close else "")
            + "'concur show PACK' lists a pack's variables",
        )


def _determines(pack: str, find: tuple[str, ...], given: Mapping[str, Any]) -> bool:
    """Whether ``pack``'s equations determine every target from ``given`` (structure only)."""
    model = build_model([pack])
    try:
        values = resolve_givens(model, dict(given)).values
    except ConcurError:
        return False
    problem = structure(model, {k: v for k, v in values.items() if k not in find}, find)  # the solve's own, cached
    return all(t in problem.known or t in problem.matching.determined for t in find)


def targets_of(find: str | Iterable[str]) -> tuple[str, ...]:
    """``"a,b"`` or ``["a", "b"]`` as a tuple of names; refuses an empty question."""
    names = [f.strip() for f in find.split(",")] if isinstance(find, str) else [str(f).strip() for f in find]
    names = [n for n in names if n]
    if not names:
        raise UsageError("nothing to solve for", hint="name at least one variable to find")
    return tuple(names)


def solve(
    find: str | Iterable[str], given: Mapping[str, Any] | None = None, packs: str | Iterable[str] | None = None
) -> Solution:
    """Solve for ``find`` (a name, ``"a,b"`` or a list) from ``given`` over ``packs``.

    ``packs``: names or paths; by default the smallest shipped pack(s) declaring the targets.
    ``given`` maps variable or preset names to values (see the module docstring).
    Raises a :class:`concur.errors.ConcurError` (the CLI's exit code is ``err.exit_code``).
    """
    targets = targets_of(find)
    model = load_model(packs) if packs else build_model(packs_for(targets, given))
    try:
        return solve_model(model, targets, dict(given or {}))
    except UnderdeterminedError as exc:  # only the inputs that would answer, and why one is unset
        raise narrow_missing(exc, model, targets, dict(given or {})) from None
