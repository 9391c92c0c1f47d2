"""Forward steps compiled to Python source give what their closures give, bit for bit.

``concur.lang.codegen`` writes a formula as Python source and ``concur.solver.forward_program``
runs a search's inner steps as one compiled function; both replace interpreted closures on the
hottest path of every search, so each is held to the closure it replaces: every formula of the
shipped packs on random values (the same float, or the same exception), and every pack example
solved with its searches compiled from the first run against interpreted throughout.
"""

from __future__ import annotations

import math
import random
from functools import partial
from pathlib import Path

import pytest

from concur import compiled
from concur.lang.codegen import MAX_INLINE_DEPTH, Namespace, expression_source
from concur.lang.expr import Neg, Num, Var, compile_node, names_in, parse_expression
from concur.lang.library import load_pack_file
from concur.lang.model import build_model
from concur.solver import forward_program
from concur.solver.question import solve_model

ROOT = Path(__file__).resolve().parents[2]
PACKS = sorted((ROOT / "formulas").glob("*.yaml"))


def _generated(node, env):
    ns = Namespace()
    source = expression_source(node, ns)
    return eval(f"lambda env: {source}", ns.globals)(env)  # the code under test


def _outcome(fn, env):
    try:
        value = fn(env)
    except Exception as exc:  # the exception's type is the outcome
        return ("raises", type(exc))
    return ("value", type(value), value if not (isinstance(value, float) and math.isnan(value)) else "nan")


def _sides():
    for path in PACKS:
        model = build_model([str(path)])
        for eq in model.equations:
            yield from (eq.lhs, eq.rhs)


@pytest.mark.parametrize("seed", range(3))
def test_every_shipped_formula_evaluates_as_its_closure(seed):
    rng = random.Random(seed)
    sides = list(_sides())
    assert len(sides) > 200
    for node in sides:
        env = {
            name: rng.choice([0.0, 1.0, 2.5, rng.uniform(-5, 5), rng.lognormvariate(0, 6)]) for name in names_in(node)
        }
        assert _outcome(lambda e, n=node: _generated(n, e), env) == _outcome(compile_node(node), env), node


def test_a_name_is_looked_up_never_written_into_the_source():
    hostile = "x'] + __import__('os').getpid() + env['x"
    ns = Namespace()
    source = expression_source(Var(hostile), ns)
    assert hostile not in source and "__import__" not in source
    assert eval(f"lambda env: {source}", ns.globals)({hostile: 2.0}) == 2.0


def test_nesting_beyond_the_inline_depth_runs_through_closures():
    node = Num(1.5)
    for _ in range(20 * MAX_INLINE_DEPTH):  # ten times what Python's parser accepts as parentheses
        node = Neg(node)
    assert _generated(node, {}) == 1.5


def test_a_formula_that_refers_to_nothing_unknown_still_compiles():
    node = parse_expression("2 * y + min(y, 3) ** 2")
    assert _generated(node, {"y": 1.25}) == compile_node(node)({"y": 1.25})


def _solve_examples():
    out = []
    for path in PACKS:
        pack = load_pack_file(path)
        model = build_model([str(path)])
        for example in pack.examples:
            try:
                sol = solve_model(model, tuple(example.find), dict(example.given))
            except Exception as exc:  # the examples that expect a refusal
                out.append((path.name, example.name, type(exc).__name__))
                continue
            out.append((path.name, example.name, tuple(sorted(sol.values.items()))))
    return out


def test_pack_examples_solve_the_same_compiled_or_interpreted(monkeypatch):
    monkeypatch.setattr(forward_program, "COMPILE_AFTER", 10**9)
    compiled.forget()
    interpreted = _solve_examples()
    monkeypatch.setattr(forward_program, "COMPILE_AFTER", 0)
    compiled.forget()
    calls = []
    real = forward_program.forward_program
    monkeypatch.setattr(forward_program, "forward_program", lambda *a: calls.append(1) or real(*a))
    generated = _solve_examples()
    compiled.forget()
    assert calls, "no search compiled its steps: the comparison compared nothing"
    assert generated == interpreted


def _probed_runs(monkeypatch):
    """(steps, variables, env) for the first probes of every steps tuple the pack examples search."""
    from concur.solver import blocks

    seen: dict[int, int] = {}
    runs = []
    real = blocks._Run.probe

    def probe(self, steps):
        if seen.get(id(steps), 0) < 3:
            seen[id(steps)] = seen.get(id(steps), 0) + 1
            runs.append((steps, self.model.variables, dict(self.env)))
        return real(self, steps)

    monkeypatch.setattr(blocks._Run, "probe", probe)
    compiled.forget()
    _solve_examples()
    compiled.forget()
    return runs


def _nudged(env, rng):
    out = {}
    for name, value in env.items():
        pick = rng.random()
        if isinstance(value, float) and pick < 0.2:
            value = round(value) + rng.choice([1e-12, -1e-12, 0.4, 0.0])  # near a whole number: the snap
        elif isinstance(value, float) and pick < 0.3:
            value = -value  # out of bounds: the full path's turn
        elif isinstance(value, float) and pick < 0.35:
            value = 0.0
        elif isinstance(value, float) and pick < 0.4:
            value = 1e300  # products overflow to inf: not finite, the full path's turn
        out[name] = value
    return out


def test_a_compiled_run_settles_the_same_steps_with_the_same_values(monkeypatch):
    rng = random.Random(7)
    runs = _probed_runs(monkeypatch)
    assert len(runs) > 20
    for steps, variables, env in runs:
        compiled_run = forward_program.forward_program(steps, variables)
        interpreted_run = forward_program.interpreted_program(steps, variables)
        for start, trial in [(0, 0)] + [(k, t) for k in range(len(steps)) for t in (1, 2, 3)]:
            given = env if trial == 0 else _nudged(env, rng)
            a, b = dict(given), dict(given)
            assert _outcome(partial(compiled_run, start=start), a) == _outcome(partial(interpreted_run, start=start), b)
            assert a.keys() == b.keys()
            assert [k for k in a if not (a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]))] == []
