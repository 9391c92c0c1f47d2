"""Structural analysis: which equation computes which unknown, and in what order.

This is the recipe of equation-based modelling tools (EES, Modelica compilers): build the bipartite
graph equations x unknowns, find a maximum matching, then

* **Dulmage–Mendelsohn** split: unknowns reachable from an unmatched unknown by
  an alternating path cannot be determined (the under-determined part);
  equations reachable from an unmatched equation are redundant checks;
* **block order**: strongly connected components of the matched dependency
  graph (Tarjan), emitted so every block comes after the blocks it reads.
  A block of one equation is solved alone; larger blocks are algebraic loops.

Everything here is plain Python on names: no sympy, no floats.
"""

from __future__ import annotations

from typing import Any

from ..records import record

__all__ = ["Matching", "blocks_in_order", "dependencies", "match", "needed_for", "repartition"]


@record
class Matching:
    """A maximum matching of equations onto unknowns, with its Dulmage–Mendelsohn sets."""

    eq_to_var: dict[int, str]
    var_to_eq: dict[str, int]
    undetermined: frozenset[str]  # unknowns the equations cannot pin down
    free: frozenset[str]  # unknowns left unmatched (a subset of undetermined)
    redundant: frozenset[int]  # equations not used to compute anything

    @property
    def determined(self) -> frozenset[str]:
        return frozenset(self.var_to_eq) - self.undetermined


def match(
    equations: dict[int, frozenset[str]],
    unknowns: set[str],
    prefer: dict[int, str] | None = None,
    last: frozenset[int] = frozenset(),
) -> Matching:
    """Maximum matching of equations (id -> unknown names they contain) onto unknowns.

    Equations in ``last`` are matched after all others, so they are the ones left over (checked,
    not solved through) wherever the system has one equation too many: a given ``replicas`` makes
    ``replicas = ceil(in_flight / ...)`` a requirement, not a way to compute ``in_flight``.

    ``prefer`` proposes an initial assignment (e.g. an equation's left-hand
    variable), which keeps the matching close to how packs are written.
    """
    adj = {e: sorted(v for v in names if v in unknowns) for e, names in equations.items()}
    eq_to_var: dict[int, str] = {}
    var_to_eq: dict[str, int] = {}
    if prefer:
        for e, v in prefer.items():
            if v in unknowns and v in adj.get(e, ()) and v not in var_to_eq:
                eq_to_var[e], var_to_eq[v] = v, e

    def augment(root: int) -> bool:
        """An augmenting path from equation ``root`` by iterative depth-first search (no recursion,
        so a 10,000-equation chain solved backwards matches like a short one). At each equation a
        free unknown is taken before any matched one is displaced (MC21's cheap assignment), so
        the preferred assignments survive wherever they can."""
        seen: set[str] = set()
        # [equation, next neighbour to try, variable it takes]: mutable (int, int, str) rows
        frames: list[list[Any]] = [[root, 0, ""]]
        while frames:
            frame = frames[-1]
            options = adj[frame[0]]
            free = next((v for v in options if v not in var_to_eq and v not in seen), None)
            if free is not None:
                frame[2] = free
                for e, _i, w in frames:  # flip the path: every equation on it takes its variable
                    eq_to_var[e], var_to_eq[w] = w, e
                return True
            while frame[1] < len(options) and options[frame[1]] in seen:
                frame[1] += 1
            if frame[1] == len(options):
                frames.pop()  # a dead end: the parent tries its next neighbour
                continue
            v = options[frame[1]]
            frame[1] += 1
            frame[2] = v
            seen.add(v)
            frames.append([var_to_eq[v], 0, ""])
        return False

    for e in sorted(adj, key=lambda e: e in last):  # stable: the packs' order, ``last`` at the end
        if e not in eq_to_var:
            augment(e)
    return _partition(adj, unknowns, eq_to_var, var_to_eq)


def repartition(equations: dict[int, frozenset[str]], unknowns: set[str], matching: Matching) -> Matching:
    """``matching``'s assignment with the Dulmage–Mendelsohn sets recomputed for ``equations`` and
    ``unknowns``: for a system that lost unknowns ``matching`` left free (given values), where
    :func:`match` would find the very same assignment (a free unknown never decided a search)."""
    adj = {e: [v for v in names if v in unknowns] for e, names in equations.items()}
    return _partition(adj, unknowns, matching.eq_to_var, matching.var_to_eq)


def _partition(
    adj: dict[int, list[str]], unknowns: set[str], eq_to_var: dict[int, str], var_to_eq: dict[str, int]
) -> Matching:
    """Dulmage–Mendelsohn: alternating reachability from unmatched unknowns."""
    var_eqs: dict[str, list[int]] = {}
    for e, vs in adj.items():
        for v in vs:
            var_eqs.setdefault(v, []).append(e)
    free = {v for v in unknowns if v not in var_to_eq}
    undetermined = set(free)
    stack = list(free)
    while stack:
        v = stack.pop()
        for e in var_eqs.get(v, ()):
            w = eq_to_var.get(e)
            if w is not None and w not in undetermined:
                undetermined.add(w)
                stack.append(w)
    redundant = frozenset(e for e in adj if e not in eq_to_var)
    return Matching(eq_to_var, var_to_eq, frozenset(undetermined), frozenset(free), redundant)


def dependencies(equations: dict[int, frozenset[str]], matching: Matching) -> dict[int, list[int]]:
    """Per matched equation, the matched equations computing what it reads (in name order)."""
    var_to_eq = matching.var_to_eq
    return {
        e: [var_to_eq[w] for w in sorted(equations[e]) if w != v and w in var_to_eq]  # sorted: one order
        for e, v in matching.eq_to_var.items()
    }


def needed_for(deps: dict[int, list[int]], matching: Matching, wanted: set[str]) -> set[int]:
    """The equations ``wanted`` needs (those computing it and their ancestors in ``deps``): exactly
    the equations of :func:`blocks_in_order`'s blocks, without ordering them."""
    var_to_eq = matching.var_to_eq
    needed: set[int] = set()
    stack = [var_to_eq[v] for v in wanted if v in var_to_eq]
    while stack:
        e = stack.pop()
        if e in needed:
            continue
        needed.add(e)
        stack.extend(deps[e])
    return needed


def blocks_in_order(
    equations: dict[int, frozenset[str]],
    matching: Matching,
    wanted: set[str],
    deps: dict[int, list[int]] | None = None,
) -> list[list[int]]:
    """Blocks (lists of equation ids) needed for ``wanted``, each after the blocks it reads.
    ``deps``: :func:`dependencies` of ``equations`` and ``matching`` when the caller has them."""
    if deps is None:
        deps = dependencies(equations, matching)
    needed = needed_for(deps, matching, wanted)  # ancestors of the wanted variables
    # Tarjan's SCC (iterative), emits components in reverse topological order of deps -> which is
    # dependency-first order here because edges point from an equation to what it reads.
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    order: list[list[int]] = []
    scc_stack: list[int] = []
    counter = 0
    successors = {e: [d for d in deps[e] if d in needed] for e in needed}  # once, not per visit
    for root in sorted(needed):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                scc_stack.append(node)
                on_stack.add(node)
            succ = successors[node]
            if i < len(succ):
                work.append((node, i + 1))
                nxt = succ[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            for d in succ:
                if d in on_stack:
                    low[node] = min(low[node], low[d])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = scc_stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                order.append(sorted(comp))
    return order
