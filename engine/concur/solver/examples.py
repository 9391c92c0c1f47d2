"""A pack's ``examples:`` as checks: solve each one and compare with what it expects.

``concur check`` runs them, so a pack whose example expects 21 for ``b = 2 a`` with ``a = 10``
fails in the CI of the team that wrote it, with ``file:line``, the expected and the computed
value. Expected values follow the one rule for numbers (:mod:`concur.lang.values`): a bare
number is in the variable's display unit, ``{value: 55, unit: user}`` in the unit named.

An example with ``error: ClassName`` expects the solve to be refused with that error class (or a
subclass): a pack can document the questions it must refuse.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ConcurError, Location
from ..lang.check import Diagnostic
from ..lang.checked import examples_passed, remember_examples
from ..lang.library import load_pack_file, recording
from ..lang.model import Model, build_model
from ..lang.pack import Example, Expectation, Pack
from .question import solve_model
from .roots import EXAMPLE_ABS

__all__ = ["ExampleFailure", "example_diagnostics", "failures_in", "run_example"]


class ExampleFailure(ConcurError, AssertionError):
    """A pack example whose answer differs from what it expects (``concur check``: exit 1)."""

    exit_code = 1


def _compare(name: str, got: float, exp: Expectation) -> str | None:
    want = float(exp.value)
    if exp.abs is not None:
        ok = abs(got - want) <= exp.abs
        tol = f"± {exp.abs:g}"
    else:
        ok = math.isclose(got, want, rel_tol=exp.rel, abs_tol=EXAMPLE_ABS)
        tol = f"rel {exp.rel:g}"
    return None if ok else f"{name}: expected {want:.10g} ({tol}), got {got:.10g}"


def run_example(model: Model, example: Example) -> list[str]:
    """The mismatches of one example (empty when it holds). Raises nothing for a wrong answer;
    a :class:`ConcurError` the example did not expect is reported as a mismatch too."""
    try:
        sol = solve_model(model, tuple(example.find), dict(example.given))
    except ConcurError as exc:
        if example.error and any(c.__name__ == example.error for c in type(exc).__mro__):
            return []
        return [f"solving raised {type(exc).__name__}: {exc.render_body()}"]
    if example.error:
        return [f"expected the solve to be refused with {example.error}, but it answered"]
    out: list[str] = []
    for name, exp in example.expect.items():
        if name not in sol.values:
            out.append(f"{name}: expected a value, but the solution has none (add it to find:)")
            continue
        var = sol.model.variable(name)
        if var.choices:
            got_text = var.choices[int(sol.values[name])]
            if got_text != exp.value:
                out.append(f"{name}: expected {exp.value}, got {got_text}")
            continue
        got = sol.value(name, exp.unit) if exp.unit else sol.value(name)
        problem = _compare(name, got, exp)
        if problem:
            unit = exp.unit or var.display.text
            out.append(problem + (f" {unit}" if unit else ""))
    return out


def failures_in(pack: Pack, model: Model | None = None) -> Iterator[tuple[Location, str]]:
    """``(where, message)`` for every failing example of ``pack`` (solved with the packs it uses)."""
    model = model or build_model([pack.path])
    for example in pack.examples:
        for problem in run_example(model, example):
            yield example.where, f"example '{example.name}': {problem}"


def example_diagnostics(paths: list[str], skip: set[str] | frozenset[str] = frozenset()) -> list[Any]:
    """``concur check``'s second pass: a Diagnostic for every failing example of the pack files (or
    folders of them) in ``paths``. Packs that do not load, and files in ``skip`` (those with problems
    already reported), are left to the unit check's diagnostics. A pack whose examples all passed
    with the same bytes of it, of every pack and catalog it read and of concur is not solved again
    (:mod:`concur.lang.checked`); a failure is never remembered."""
    out: list[Diagnostic] = []
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        files.extend(sorted(path.glob("*.yaml")) if path.is_dir() else [path])
    for f in files:
        if str(f) in skip or examples_passed(f):  # a pass is remembered by every input's bytes
            continue
        with recording() as reads:
            try:
                pack = load_pack_file(f)
                model = build_model([str(f)])
            except ConcurError:
                continue
            failed = [Diagnostic(where, message) for where, message in failures_in(pack, model)]
        if not failed:
            remember_examples(f, reads)
        out.extend(failed)
    return out
