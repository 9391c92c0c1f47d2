"""One structural problem: fixed knowns, the equations specialised to them, defaults applied.

``if_`` whose condition is known is folded away (a GQA model needs no ``kv_lora_rank``);
defaults fill in, one at a time in declaration order, only what the givens leave undetermined
or would determine only by inverting an equation, so a default never contradicts a given.
The matching (:mod:`concur.solver.structure`) says which equation computes which unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..compiled import Table, closure, compiled
from ..lang.expr import Bin, Call, Cmp, If, Logic, Neg, Node, Var, compile_node, names_in, walk
from ..lang.functions import FUNCTIONS
from ..lang.model import Model
from ..lang.pack import Equation, Variable
from .roots import BOUNDS_SLACK
from .roots import in_bounds as bounds_hold
from .structure import Matching, match, repartition

__all__ = ["Problem", "SpecialisedEq", "evaluate", "fold_known", "in_bounds", "smooth_in"]


def _names_and_test(cond: Node) -> tuple[frozenset[str], Any]:
    return names_in(cond), compile_node(cond)


def _test(cond: Node) -> tuple[frozenset[str], Any]:
    """(the names ``cond`` reads, its compiled test), once per condition node."""
    return closure(cond, _names_and_test)


def fold_known(node: Node, known: dict[str, float]) -> Node:
    """Replace ``if_`` nodes whose condition is computable from ``known`` by the chosen branch.

    Top-down, and a subtree with nothing to fold is returned as the same object (so the tests
    compiled per condition node stay cached, and specialisations compare by identity first)."""
    if isinstance(node, If):
        names, test = _test(node.cond)
        if names <= known.keys():
            try:
                return fold_known(node.then if test(known) else node.other, known)
            except (ArithmeticError, ValueError):
                pass
        parts = (fold_known(node.cond, known), fold_known(node.then, known), fold_known(node.other, known))
        return node if all(a is b for a, b in zip(parts, (node.cond, node.then, node.other))) else If(*parts)
    if isinstance(node, (Bin, Cmp)):
        left, right = fold_known(node.left, known), fold_known(node.right, known)
        return node if left is node.left and right is node.right else type(node)(node.op, left, right)
    if isinstance(node, Neg):
        arg = fold_known(node.arg, known)
        return node if arg is node.arg else Neg(arg)
    if isinstance(node, (Call, Logic)):
        args = tuple(fold_known(a, known) for a in node.args)
        return (
            node
            if all(a is b for a, b in zip(args, node.args))
            else type(node)(node.fn if isinstance(node, Call) else node.op, args)
        )
    return node


@dataclass(frozen=True)
class SpecialisedEq:
    """An equation with the ``if_`` its knowns decide folded away; ``names`` the variables left in it."""

    eq: Equation
    lhs: Node
    rhs: Node
    names: frozenset[str]


_Folding = tuple[list[SpecialisedEq], list[SpecialisedEq | None], dict[str, tuple[int, ...]]]


def _folding(model: Model) -> _Folding:
    """Per equation, the equation with nothing folded, and the same as every problem specialises it
    when it has no ``if_`` (None for one with branches); per name, the equations whose ``if_``
    conditions read it (what can change their folding), in the model's order."""
    names_read, unfolded, plain = [], [], []
    for eq in model.equations:
        names: set[str] = set()
        branches = False
        for side in (eq.lhs, eq.rhs):
            for n in walk(side):
                if isinstance(n, If):
                    names |= names_in(n.cond)
                    branches = True
        names_read.append(frozenset(names))
        unfolded.append(SpecialisedEq(eq, eq.lhs, eq.rhs, eq.names))
        plain.append(None if branches else unfolded[-1])
    readers: dict[str, list[int]] = {}
    for i, read in enumerate(names_read):
        for name in read:
            readers.setdefault(name, []).append(i)
    return unfolded, plain, {name: tuple(eqs) for name, eqs in readers.items()}


def _folding_of(model: Model) -> _Folding:
    """:func:`_folding`, built once per model."""
    return compiled(model.key).once("problem.folding", lambda: _folding(model))


def _shape(e: SpecialisedEq, known: dict[str, float]) -> tuple[frozenset[str], str | None, bool]:
    """All the matching (:meth:`Problem._match`) reads of an equation while ``known`` are known,
    or later (knowns only grow): the names in it not known, the variable alone on its left (the
    assignment it prefers; a requirement when it is known and the right side rounds or it is a
    limit) and whether its right side is a ceil/floor. Two foldings of one shape match alike."""
    lhs = e.lhs.name if isinstance(e.lhs, Var) else None
    return (
        frozenset(n for n in e.names if n not in known),
        lhs,
        isinstance(e.rhs, Call) and e.rhs.fn in ("ceil", "floor"),
    )


class _State:
    """One structural state a problem's defaults pass through: the names known and every equation's
    :func:`_shape` (all the matching reads), named by a key that determines both -- the first
    state's lists them, each next state's is (the state before, the default just given, the new
    shapes of the equations whose ``if_`` conditions read it). Kept per model
    (:attr:`concur.compiled.Compiled.matchings`) with the matching of its system, found by the
    first problem to reach it; a state dropped from the table is only a miss for the next."""

    __slots__ = ("matching", "repartitioned")

    def __init__(self) -> None:
        self.matching: Matching | None = None
        self.repartitioned: tuple[Matching, Matching] | None = None  # (a stale matching, it repartitioned here)


def _state(states: Table[Any, Any], key: tuple[Any, ...]) -> _State:
    hit: _State | None = states.get(key)
    return hit if hit is not None else states.put(key, _State())


# ---------------------------------------------------------------- the solver


class Problem:
    """One structural problem: fixed knowns, unknowns, equations specialised to them."""

    def __init__(
        self, model: Model, known: dict[str, float], targets: tuple[str, ...], relax: frozenset[int] = frozenset()
    ) -> None:
        self.model = model
        self.known = dict(known)
        self.targets = targets
        self.relax = relax  # equations n = ceil(e) / floor(e) read as n = e (a search's boundary)
        self.defaults_used: list[str] = []
        choice_defaults = {
            n: v.default
            for n, v in model.variables.items()
            if v.choices and n not in self.known and v.default is not None and n not in targets
        }
        for n, d in choice_defaults.items():
            self.known[n] = d
            self.defaults_used.append(n)
        self._specialise()
        self._apply_defaults()

    def _specialise(self, changed: str | None = None) -> bool:
        """Fold every equation (``changed`` None), or only those whose ``if_`` conditions read
        ``changed`` (a default just applied): the others cannot change. True when the folding
        changed what the matching reads of some equation (:func:`_shape`): its unknowns, the variable
        alone on its left, whether its right side rounds."""
        if changed is None:
            self.eqs: dict[int, SpecialisedEq] = {}
        unfolded, plain, readers = _folding_of(self.model)
        equations = self.model.equations
        reshaped = False
        for i in range(len(equations)) if changed is None else readers.get(changed, ()):
            eq = equations[i]
            before = self.eqs.get(i)
            same = plain[i]
            if same is not None and i not in self.relax:
                self.eqs[i] = same
            else:
                lhs, rhs = fold_known(eq.lhs, self.known), fold_known(eq.rhs, self.known)
                if i in self.relax and isinstance(rhs, Call) and rhs.fn in ("ceil", "floor"):
                    rhs = rhs.args[0]
                if lhs is eq.lhs and rhs is eq.rhs:  # nothing folded: the names are the equation's
                    self.eqs[i] = unfolded[i]
                else:
                    self.eqs[i] = SpecialisedEq(eq, lhs, rhs, names_in(lhs) | names_in(rhs))
            reshaped = reshaped or before is None or _shape(before, self.known) != _shape(self.eqs[i], self.known)
        return reshaped

    def _system(self) -> tuple[dict[int, frozenset[str]], set[str]]:
        """The equations that hold an unknown, each with only its unknowns (all that matching reads:
        equations that differ only in known names match alike), and the unknowns."""
        unknowns = {n for n in self.model.variables if n not in self.known}
        return {i: held for i, e in self.eqs.items() if (held := e.names & unknowns)}, unknowns

    def _match(self, state: _State) -> Matching:
        """The matching of the current system, found once per model for every problem in ``state``."""
        if state.matching is None:
            system, unknowns = self._system()
            prefer = {i: lhs.name for i in system if isinstance(lhs := self.eqs[i].lhs, Var) and lhs.name in unknowns}
            state.matching = match(system, unknowns, prefer, self.requirements())
        return state.matching

    def _repartition(self, state: _State, m: Matching) -> Matching:
        """:func:`repartition` of ``m`` for the current system, found once per ``state`` and ``m``
        (the very object: matchings come from the states, so they recur)."""
        done = state.repartitioned
        if done is not None and done[0] is m:
            return done[1]
        fresh = repartition(*self._system(), m)
        state.repartitioned = (m, fresh)
        return fresh

    def requirements(self) -> frozenset[int]:
        """Equations that state a requirement on a known left side, solved through only when nothing
        else determines their unknowns: a rounding whose count is given (``replicas = ceil(...)``
        with replicas given) and a target given as a limit (``itl_slo = itl`` with itl_slo given)."""
        out = set()
        for i, e in self.eqs.items():
            if i in self.relax or not isinstance(e.lhs, Var) or e.lhs.name not in self.known:
                continue
            rounding = isinstance(e.rhs, Call) and e.rhs.fn in ("ceil", "floor")
            if rounding or self.model.variables[e.lhs.name].limit:
                out.add(i)
        return frozenset(out)

    def _apply_defaults(self) -> None:
        """Defaults in declaration order, each decided on the matching of the knowns so far.

        A default given to an unknown the matching left free (nothing computes it), or whose
        folding leaves every equation's :func:`_shape` alone, leaves the matching of the rest as a
        fresh one would find it, so only the Dulmage–Mendelsohn sets are recomputed, and only when
        a later decision reads them: a pack of 1,000 defaulted inputs costs a few matchings, not
        1,000. Each step's system is named by a :class:`_State` of the model, so problems that
        differ only in values (two GPUs of a family) share their matchings."""
        states = compiled(self.model.key).matchings
        readers = _folding_of(self.model)[2]
        known, eqs = self.known, self.eqs
        branchy = [i for i, same in enumerate(_folding_of(self.model)[1]) if same is None]
        # the start: an equation without if_ has the one shape its knowns give it, so only the others'
        state = _state(states, ("start", frozenset(known), self.relax, tuple(_shape(eqs[i], known) for i in branchy)))
        m = self._match(state)
        stale = False  # m's DM sets still count unknowns that defaults have since made known
        for name, var in self.model.variables.items():
            if var.default is None or name in self.known or name in self.targets:
                continue
            free = name not in m.var_to_eq
            if not free:
                if stale:
                    m, stale = self._repartition(state, m), False
                if name in m.determined and self._computed_naturally(m, name):
                    continue
            self.known[name] = var.default
            self.defaults_used.append(name)
            reshaped = self._specialise(name)
            state = _state(states, (state, name, tuple(_shape(self.eqs[i], known) for i in readers.get(name, ()))))
            if reshaped or not free:
                m, stale = self._match(state), False
            else:
                stale = True
        self.matching = self._repartition(state, m) if stale else m

    def _computed_naturally(self, m: Matching, name: str) -> bool:
        """Whether the givens determine ``name`` in a way that should override its default.

        Yes when its equation has it alone on the left (computed forward), or when that
        equation's other variables are all known already (one inversion straight from the
        givens: ``active_params`` given, so ``active_fraction = active_params / params``).
        No when it would be back-solved through a chain of computed values (``pp`` from a
        given ``kv_pool``): then the default holds and the over-determined givens are checked.
        """
        i = m.var_to_eq.get(name)
        if i is None:
            return False
        e = self.eqs[i]
        if isinstance(e.lhs, Var) and e.lhs.name == name:
            return True
        return all(n in self.known for n in e.names if n != name)

    def missing(self) -> list[str]:
        """Unknowns nothing determines: inputs first, then values an equation would compute."""
        m = self.matching
        lhs_vars = {e.lhs.name for e in self.eqs.values() if isinstance(e.lhs, Var)}
        free = sorted(m.free, key=lambda v: (v in lhs_vars, list(self.model.variables).index(v)))
        return free


def smooth_in(node: Node, var: str) -> bool:
    """False when ``var`` sits inside floor/ceil/erlang/% or a comparison (never inverted)."""
    for n in walk(node):
        if isinstance(n, Call) and not FUNCTIONS[n.fn].smooth and var in names_in(n):
            return False
        if isinstance(n, Cmp) and var in names_in(n):
            return False
        if isinstance(n, Bin) and n.op == "%" and var in names_in(n):
            return False
    return True


def evaluate(node: Node, env: dict[str, float]) -> float:
    value: float = compile_node(node)(env)  # a scalar closure over scalars gives a number
    return value


def in_bounds(var: Variable, value: float, slack: float = BOUNDS_SLACK) -> bool:
    """``var``'s bounds by the numeric policy's rule (:func:`concur.solver.roots.in_bounds`)."""
    return bounds_hold(var.bounds, value, slack)
