"""Problems of one model share the matchings of the structural states their defaults pass through.

Counts matchings (never times) and compares every memoised problem with one built from nothing:
the same defaults, the same specialised equations, the same matching and Dulmage-Mendelsohn sets.
"""

from __future__ import annotations

from typing import Any

import pytest

from concur import compiled
from concur.lang.expr import Var
from concur.lang.model import build_model
from concur.solver import problem as problem_module
from concur.solver.givens import resolve_givens
from concur.solver.problem import Problem
from concur.solver.structure import match

QUESTION = {
    "model": "llama-3.1-70b",
    "input_tokens": "1000 token/request",
    "output_tokens": "400 token/request",
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
}
TARGETS = ("per_replica_concurrency", "kv_concurrency", "batch_cap", "gpus_per_replica")
GPUS = ("h100-sxm-80gb", "h200-sxm-141gb", "b200", "mi300x")


@pytest.fixture
def matchings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per matching the problems really computed (compiled state dropped first)."""
    compiled.forget()
    calls: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return match(*args, **kwargs)

    monkeypatch.setattr(problem_module, "match", counting)
    return calls


def _known(gpu: str, tp: int) -> dict[str, float]:
    model = build_model(["llm_fleet"])
    return dict(resolve_givens(model, {**QUESTION, "gpu": gpu, "tp": tp}).values)


def _problem(gpu: str, tp: int) -> Problem:
    return Problem(build_model(["llm_fleet"]), _known(gpu, tp), TARGETS)


def _same(a: Problem, b: Problem) -> None:
    assert a.defaults_used == b.defaults_used
    assert a.known == b.known
    assert a.eqs == b.eqs
    assert a.matching == b.matching


def test_a_second_problem_of_the_same_shape_computes_no_matching(matchings: list[int]) -> None:
    _problem("h100-sxm-80gb", 4)
    first = len(matchings)
    assert first >= 1
    _problem("h100-sxm-80gb", 8)  # other values, the same names and foldings
    assert len(matchings) == first


def test_memoised_problems_equal_problems_built_from_nothing(matchings: list[int]) -> None:
    together = [_problem(gpu, tp) for gpu in GPUS for tp in (2, 4, 8)]
    shared = len(matchings)
    alone = []
    for gpu in GPUS:
        for tp in (2, 4, 8):
            compiled.forget()
            alone.append(_problem(gpu, tp))
    assert shared < len(matchings) - shared  # sharing computed fewer matchings than building alone
    for a, b in zip(together, alone):
        _same(a, b)


def test_the_final_matching_is_the_one_a_fresh_match_finds(matchings: list[int]) -> None:
    """The assignment kept through free defaults (and reused across problems) is what matching
    the final system from scratch gives, DM sets included."""
    for gpu in GPUS:
        p = _problem(gpu, 4)
        system, unknowns = p._system()
        prefer = {i: e.lhs.name for i, e in p.eqs.items() if i in system and isinstance(e.lhs, Var)}
        assert p.matching == match(system, unknowns, prefer, p.requirements())
