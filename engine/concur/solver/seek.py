"""Which questions are goal seeks, and over which variable: a structural decision, cached per shape.

A question is answered directly when the plan can compute the asked variable from the givens.
It is a *goal seek* (:mod:`concur.solver.goal_seek`) when

1. the asked variable lies upstream of a given target (``limit: at_least/at_most``: a service
   level, a budget): then the input that drives the target is searched -- an integer input such as
   ``servers`` first, else the asked variable itself;
2. the asked variable rounds up to its own requirement (``replicas = ceil(...)``) and given targets
   downstream of it (an ITL or TTFT limit) may need more: it is searched against the requirement
   and every such target, and the answer says which binds;
3. reaching it would invert a floor/ceil or produce an integer from a continuous relation: the
   given whose removal frees it, and that it drives, becomes the goal (rounded counts first);
4. several given targets, or targets with a given count (``replicas=3`` and an ITL target): every
   target is a goal at once and none is used as a value. A budget that depends on the asked
   variable only through a rounded count is met first (the most replicas it pays for), the other
   targets then at that count; a given count stays a value, held to its own rounding.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..cache import cache_dir, digest, read_json, source_digest, write_json
from ..compiled import compiled
from ..lang.expr import Call, Var, names_in, walk
from ..lang.model import Model
from ..records import record
from .givens import Givens
from .plan import plan_key, structure
from .problem import Problem, smooth_in

__all__ = ["Seek", "needs_search", "rounding_equation"]


@record
class Seek:
    """A question answered by a goal seek: search ``variable`` until every given target in ``goals``
    is met (and, with ``requirement``, the rounding equation that defines the variable). With
    ``via``, the goals depend on ``variable`` only through that rounded count: the count is searched
    against the goals first, then ``variable`` against the count (two cheap searches, not one
    search whose every trial solves the count's loop)."""

    variable: str
    goals: tuple[str, ...]
    requirement: int | None = None
    via: str | None = None  # a rounded count the goals depend on alone: searched first (budget -> replicas -> rate)
    later: tuple[str, ...] = ()  # with via: targets met in the second search, at that count (SLAs)
    held: tuple[str, ...] = ()  # given counts kept as values and held to their rounding (replicas=3)


def needs_search(model: Model, find: tuple[str, ...], known: Mapping[str, float], givens: Givens) -> Seek | None:
    """(asked variable, given goal) when the answer must be searched for rather than computed.

    Two cases: the asked variable lies upstream of a given target (``limit:``), or reaching it
    would invert a floor/ceil or produce an integer from a continuous relation. The goal is the
    given whose removal leaves the asked variable free while the goal follows from it; rounded
    counts (users, replicas) and integers are preferred as goals. Structural: cached per shape.
    """
    key = (
        plan_key(model, known, find),
        tuple(sorted(givens.limits.items())),
        tuple(sorted(k for k, s in givens.sources.items() if s == "given")),
    )
    seeks = compiled(model.key).seeks
    hit = seeks.get(key, _MISS)
    if hit is not _MISS:
        decided: Seek | None = hit
        return decided
    file = _disk_entry(model.key, key)
    kept = None if file is None else read_json(file, _KIND, _decode_seek)
    answer = kept[0] if kept is not None else _needs_search(model, find, known, givens)
    global _WRITES
    if kept is None and file is not None and _WRITES < MAX_WRITES:
        _WRITES += 1
        write_json(file, _KIND, _encode_seek(answer))
    seeks.put(key, answer)
    return answer


_KIND = "seek"
_MISS = object()  # a decision not made yet (None is a decision: no search)
MAX_WRITES = 64  # decisions one process writes at most (a fuzz run asks thousands of shapes)
_WRITES = 0


def _disk_entry(model_key: str, key: tuple[Any, ...]) -> Any:
    """The cache file remembering the decision for this shape (the packs' content, the names known,
    the targets, the folds, the limits, which names were given, and concur's own code); None when
    the shape has no stable text. A warm question reads the decision instead of probing the
    structure a dozen times (a third of the README's headline solve, once its loop is recalled)."""
    (_, known, targets, folds, relax), limits, given = key
    try:
        shape = json.dumps([sorted(known), list(targets), list(folds), sorted(relax), list(limits), list(given)])
    except (TypeError, ValueError):
        return None
    return cache_dir() / "seeks" / f"{digest(_KIND, source_digest(), model_key, shape)[:40]}.json"


def _encode_seek(seek: Seek | None) -> dict[str, Any]:
    if seek is None:
        return {"seek": None}
    fields = [seek.variable, list(seek.goals), seek.requirement, seek.via, list(seek.later), list(seek.held)]
    return {"seek": fields}


def _decode_seek(payload: Any) -> tuple[Seek | None]:
    """``(decision,)``: a one-tuple, so that "no search" (None) is told from a miss."""
    fields = payload["seek"]
    if fields is None:
        return (None,)
    variable, goals, requirement, via, later, held = fields
    names = (variable, *goals, *later, *held) + ((via,) if via is not None else ())
    if not all(isinstance(n, str) for n in names) or not (requirement is None or type(requirement) is int):
        raise TypeError("a malformed decision")
    return (Seek(variable, tuple(goals), requirement, via, tuple(later), tuple(held)),)


def _needs_search(model: Model, find: tuple[str, ...], known: Mapping[str, float], givens: Givens) -> Seek | None:
    limits = [g for g in givens.limits if g in known]

    def determined(names: Mapping[str, float], target: str) -> bool:
        return target in names or target in structure(model, names, (target,)).matching.determined

    def without(*drop: str) -> dict[str, float]:
        return {k: v for k, v in known.items() if k not in drop}

    computed = {eq.lhs.name for eq in model.equations if isinstance(eq.lhs, Var)}
    # an asked-for input (a rate) is the question; asked-for outputs (the counts and the cost that rate
    # needs) follow from it, so it is tried first whatever order the user named them in: searching a
    # count instead answers another question (the fewest workers, not the largest rate)
    find = tuple(sorted(find, key=lambda x: x in computed))
    held = _held_counts(model, known, givens, limits) if limits else ()
    if len(limits) > 1 or held:
        together = _together(model, find, known, givens, limits, determined, computed)
        if together is not None:
            return together
    for x in find:
        for g in limits:  # x upstream of a target: search the input that drives it
            base = without(g)
            if determined(base, x) or (not held and _follows_without(model, base, g, x)):
                continue  # x follows without the target, or the target without x: a check
            via = _rounded_link(model, base, x, g, determined)
            if via is not None:
                return Seek(x, (g,), via=via)
            free = structure(model, base, find).matching.undetermined - {g}
            candidates = sorted(
                (s for s in free | {x} if not model.variables[s].choices and (s == x or s not in computed)),
                key=lambda s: (not (model.variables[s].integer and s not in computed), s != x, s),
            )
            for s in candidates:
                probe = {**base, s: 1.0}
                if determined(probe, g) and determined(probe, x):
                    return Seek(s, (g,))
        rounding = rounding_equation(model, x)
        if rounding is not None and model.variables[x].integer and limits:
            # x follows from its own ceil/floor (replicas), but given targets downstream of it (an ITL
            # or TTFT limit) may need more: search x against the requirement and every such target
            driven = tuple(g for g in limits if determined({**without(g), x: 1.0}, g))
            if driven:
                return Seek(x, driven, rounding)
        if model.variables[x].choices:
            continue
        whole = structure(model, known, find)
        if x in whole.matching.determined and not _invertible_path(model, whole, x):
            drivers = sorted(
                (g for g in known if givens.sources.get(g) == "given" and g not in limits),
                key=lambda g: (not _rounded_output(model, g), not model.variables[g].integer),
            )
            for g in drivers:  # the given whose removal frees x, and that x drives
                if not determined(without(g, *limits), x) and determined({**without(g), x: 1.0}, g):
                    return Seek(x, (g,))
            counts = _given_counts(model, drivers, x, without, determined)
            if counts and not determined(without(*counts, *limits), x):
                return Seek(x, counts)  # several given counts (3P3D): the x that every one of them carries
    return None


def _given_counts(model: Model, drivers: list[str], x: str, without: Any, determined: Any) -> tuple[str, ...]:
    """The given rounded counts that ``x`` drives, each of which alone would determine ``x`` (a
    disaggregated fleet's prefill and decode workers: either gives the rate its pool carries); empty
    unless there are two or more. Removing one leaves ``x`` fixed by the others, so no single count
    frees it: they are goals together."""
    counts = tuple(g for g in drivers if _rounded_output(model, g) and determined({**without(g), x: 1.0}, g))
    return counts if len(counts) > 1 else ()


def _follows_without(model: Model, base: Mapping[str, float], g: str, x: str) -> bool:
    """Whether the target ``g`` follows from ``base`` with ``x`` left unknown (not even its default):
    then no search over ``x`` can move it (a TTFT target does not wait on the monthly cost). Not
    asked with a given count held to its rounding (``replicas=3``): the matching may then reach
    ``g`` through that rounding, which is what a search over ``x`` must meet."""
    return g in base or g in structure(model, base, (g, x)).matching.determined


def _held_counts(model: Model, known: Mapping[str, float], givens: Givens, limits: list[str]) -> tuple[str, ...]:
    """Given counts ``n = ceil(...)``/``floor(...)`` (replicas=3) that stay values in a search over
    several targets: each is held to its rounding as a requirement, not recomputed."""
    out = []
    for n in sorted(known):
        if n in limits or givens.sources.get(n) != "given" or not model.variables[n].integer:
            continue
        i = rounding_equation(model, n)
        if i is not None and not names_in(model.equations[i].rhs) <= known.keys():
            out.append(n)
    return tuple(out)


def _together(
    model: Model,
    find: tuple[str, ...],
    known: Mapping[str, float],
    givens: Givens,
    limits: list[str],
    determined: Any,
    computed: set[str],
) -> Seek | None:
    """A search against every given target at once, none used as a value (several SLAs and a
    budget; or SLAs with a given replica count). None when the targets do not all drive from one
    searched variable (the single-target rules then apply)."""
    base = {k: v for k, v in known.items() if k not in limits}
    held = _held_counts(model, known, givens, limits)
    for x in find:  # each asked-for name in turn: its own routes before the next name's
        seek = _together_via(model, x, base, limits, determined) or _together_plain(
            model, find, x, base, limits, held, determined, computed
        )
        if seek is not None:
            return seek
    return None


def _together_via(model: Model, x: str, base: Mapping[str, float], limits: list[str], determined: Any) -> Seek | None:
    """``x`` linked to the targets through a rounded count (the most replicas a budget allows)."""
    if determined(base, x):
        return None
    for g in limits:
        via = _rounded_link(model, base, x, g, determined)
        if via is None or _reaches(model, g, x, {*base, via}):
            continue
        stop = {*base, via}
        first = tuple(h for h in limits if determined({**base, via: 1.0}, h) and not _reaches(model, h, x, stop))
        later = tuple(h for h in limits if h not in first and determined({**base, x: 1.0, via: 1.0}, h))
        if len(first) + len(later) == len(limits):
            return Seek(x, first, via=via, later=later)
    return None


def _together_plain(
    model: Model,
    find: tuple[str, ...],
    x: str,
    base: Mapping[str, float],
    limits: list[str],
    held: tuple[str, ...],
    determined: Any,
    computed: set[str],
) -> Seek | None:
    """One searched variable (``x`` or an input upstream of it) that drives every target at once."""
    if determined(base, x) and (not held or not _through_rounding(model, structure(model, base, find), x)):
        return None  # computed from the givens without inverting a rounding: the targets are checks
    if not held and all(_follows_without(model, base, g, x) for g in limits):
        return None  # the targets follow without x (x waits on something else): they are checks
    free = structure(model, base, find).matching.undetermined
    candidates = sorted(
        (s for s in free | {x} if not model.variables[s].choices and (s == x or s not in computed)),
        key=lambda s: (not (model.variables[s].integer and s not in computed), s != x, s),
    )
    for s in candidates:
        probe = {**base, s: 1.0}
        if all(determined(probe, g) for g in limits) and determined(probe, x):
            return Seek(s, tuple(limits), held=held)
    return None


def _upstream(problem: Problem, x: str) -> Iterator[tuple[str, Any]]:
    """(variable, the equation matched to it) for ``x`` and everything computed on the way to it,
    each once, walking the matching upstream from ``x`` (known values end the walk)."""
    m = problem.matching
    seen: set[str] = set()
    stack = [x]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        i = m.var_to_eq.get(v)
        if i is None:
            continue
        e = problem.eqs[i]
        yield v, e
        stack.extend(n for n in e.names if n != v and n not in problem.known)


def _through_rounding(model: Model, problem: Problem, x: str) -> bool:
    """Whether computing ``x`` inverts a rounding on the way: some equation ``n = ceil(...)`` upstream
    of it is matched to a variable other than ``n`` (the batch from a given replica count)."""
    for v, e in _upstream(problem, x):
        lhs = e.lhs
        if isinstance(lhs, Var) and isinstance(e.rhs, Call) and e.rhs.fn in ("ceil", "floor") and lhs.name != v:
            return True
    return False


def _reaches(model: Model, name: str, x: str, stop: set[str]) -> bool:
    """Whether ``name``'s defining equations (``v = ...``, followed through their right-hand sides,
    never past a name in ``stop``) reach ``x``: a monthly cost stops at the replica count, a TTFT
    reaches the arrival rate through the batch. Structural, on the equations as written."""
    seen: set[str] = set()
    stack = [name]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        for eq in model.equations:
            if isinstance(eq.lhs, Var) and eq.lhs.name == v:
                for n in names_in(eq.rhs):
                    if n == x:
                        return True
                    if n not in stop:
                        stack.append(n)
    return False


def _rounded_link(model: Model, base: Mapping[str, float], x: str, g: str, determined: Any) -> str | None:
    """A count ``n = ceil(...)`` through which alone ``x`` reaches the target ``g``: ``g`` follows
    from ``n`` without ``x`` (which has no default to stand in for it), and ``n`` from ``x`` -- and
    only with ``x``: a count the givens fix already (the prefill workers of a given rate) links
    nothing, and a cost downstream of it is no input to search. A monthly budget caps the
    replicas, and the replicas cap the rate."""
    if model.variables[x].default is not None:
        return None  # without x the first search would use x's default, not leave it out
    for eq in model.equations:
        if not (isinstance(eq.lhs, Var) and isinstance(eq.rhs, Call) and eq.rhs.fn == "ceil"):
            continue
        n = eq.lhs.name
        if n in (x, g) or n in base or not model.variables[n].integer:
            continue
        if _reaches(model, g, x, {*base, n}):
            continue  # the target depends on x itself, not only through the count (an ITL on the batch)
        if determined({**base, n: 1.0}, g) and not determined(base, n) and determined({**base, x: 1.0}, n):
            return n
    return None


def rounding_equation(model: Model, name: str) -> int | None:
    """The index of ``name = ceil(...)``/``floor(...)``, the equation that rounds it, if any."""
    for i, eq in enumerate(model.equations):
        if (
            isinstance(eq.lhs, Var)
            and eq.lhs.name == name
            and isinstance(eq.rhs, Call)
            and eq.rhs.fn in ("ceil", "floor")
        ):
            return i
    return None


def _rounded_output(model: Model, name: str) -> bool:
    """``name = floor(...)`` or ``name = ceil(...) + 1``: a count the model rounds (users, replicas)."""
    return any(
        isinstance(eq.lhs, Var)
        and eq.lhs.name == name
        and any(isinstance(n, Call) and n.fn in ("floor", "ceil") for n in walk(eq.rhs))
        for eq in model.equations
    )


def _invertible_path(model: Model, problem: Problem, x: str) -> bool:
    """Whether x's block can be solved directly (forward evaluation or smooth inversion), every block
    upstream of it too: a forward formula over a value found by inverting a ceil or floor (replicas
    given, in_flight wanted) has no unique answer, it is a search for the boundary."""
    m = problem.matching
    i = m.var_to_eq.get(x)
    if i is None:
        return True
    e = problem.eqs[i]
    if isinstance(e.lhs, Var) and e.lhs.name == x and x not in names_in(e.rhs):
        return _upstream_smooth(problem, x)
    if model.variables[x].integer:
        return False
    return smooth_in(e.lhs, x) and smooth_in(e.rhs, x) and _upstream_smooth(problem, x)


def _upstream_smooth(problem: Problem, x: str) -> bool:
    """x is computed by inverting equations: every equation on the way must be smooth in what it inverts."""
    return all(
        (isinstance(e.lhs, Var) and e.lhs.name == v) or (smooth_in(e.lhs, v) and smooth_in(e.rhs, v))
        for v, e in _upstream(problem, x)
    )
