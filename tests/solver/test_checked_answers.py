"""Answers that are true or refused, on any machine: the issue's wrong answers and false refusals.

Each case was answered wrongly with exit 0, or refused although an answer exists. The solve
budget counts steps, so none of these depends on how busy the machine is.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import concur
from concur.errors import BudgetError, ConcurError
from concur.lang.model import build_model
from concur.solver.budget import budget, spent
from concur.solver.question import solve_model


def _ring(tmp_path: Path, n: int) -> Path:
    """x_i = c + sqrt(x_{i+1}) / 2 around a ring of n unknowns (its fixed point: x = c + sqrt(x) / 2)."""
    lines = [f"pack: ring{n}", "variables:", "  c: {bounds: [0, null]}"]
    lines += [f"  x{i}: {{bounds: [0, null]}}" for i in range(1, n + 1)]
    lines += ["equations:"] + [f"  - x{i} = c + 1/2*sqrt(x{i % n + 1})" for i in range(1, n + 1)]
    path = tmp_path / f"ring{n}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("n", [4, 8, 16])
def test_small_nonlinear_loops_are_torn_not_timed_out(tmp_path, monkeypatch, n):
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    fixed = ((0.5 + math.sqrt(0.25 + 4 * 1.0)) / 2) ** 2  # x = 1 + sqrt(x)/2, x = s**2
    with budget() as b:
        sol = concur.solve("x1", {"c": 1}, str(_ring(tmp_path, n)))
        used = b.used
    assert sol.value("x1") == pytest.approx(fixed, rel=1e-9)
    assert used < 20_000  # a tear and a bracket, not a symbolic solve left to a clock


def test_the_budget_counts_steps_so_a_refusal_is_the_same_every_time(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    path = _ring(tmp_path, 9)
    refusals = []
    for _ in range(2):  # the second run is not a replay: a budget refusal is never memoised
        with pytest.raises(BudgetError) as err, budget(steps=50):
            concur.solve("x1", {"c": 1}, str(path))
        refusals.append(str(err.value))
    assert refusals[0] == refusals[1]
    assert "solve budget of 50 steps" in refusals[0] and "CONCUR_SOLVE_BUDGET" in refusals[0]
    assert spent() == 0  # outside any budget


def test_a_quintic_sympy_cannot_solve_is_bracketed_not_called_impossible(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "quint.yaml"
    path.write_text("pack: quint\nvariables:\n  a: {}\n  b: {}\nequations:\n  - b = a**5 + a\n")
    assert concur.solve("a", {"b": 5}, str(path)).value("a") == pytest.approx(1.29915, rel=1e-5)


def test_nested_abs_and_even_powers_do_not_multiply_closed_forms(tmp_path, monkeypatch):
    """Each ``abs`` or even power peeled doubles the roots: ``abs(...abs(y)...)`` forty deep in a
    user's pack made isolation build 2^40 closed forms, and the solve never ended. Past
    ISOLATED_ROOT_LIMIT roots the equation goes to sympy or to bracketing."""
    from concur.lang.expr import parse_equation
    from concur.solver.closed_forms import ISOLATED_ROOT_LIMIT, isolate

    assert isolate(*parse_equation("x = " + "abs(" * 20 + "y" + ")" * 20), "y") is None
    assert len(isolate(*parse_equation("x = abs(abs(y)) ** 2"), "y") or ()) == 8 <= ISOLATED_ROOT_LIMIT
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "deep.yaml"
    path.write_text(
        "pack: deep\nvariables:\n  x: {}\n  y: {}\nequations:\n  - x = " + "abs(" * 40 + "y" + ")" * 40 + "\n"
    )
    with budget() as b:
        assert abs(concur.solve("y", {"x": 2}, str(path)).value("y")) == 2
        assert b.used < 20_000


def test_an_overflow_is_said_in_words(tmp_path, monkeypatch):
    """The message quoted errno: "cannot compute x from '...': (34, 'Numerical result out of range')"."""
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "big.yaml"
    path.write_text("pack: big\nvariables:\n  x: {}\n  y: {}\nequations:\n  - x = ((y ** 64) ** 64) ** 64\n")
    with pytest.raises(ConcurError) as err:
        concur.solve("x", {"y": 2}, str(path))
    assert "Numerical result out of range" not in str(err.value) and "(34," not in str(err.value)
    assert err.value.exit_code == 3 and err.value.variable == "x"


def test_a_target_the_givens_determine_is_compared_not_used_as_a_value():
    given = {"arrival_rate": 1, "service_time": "1 s", "servers": 3}
    sol = concur.solve(["mean_residence", "mean_in_system"], {**given, "mean_wait": "100 s"}, "queueing")
    assert sol.value("mean_residence") == pytest.approx(1 + 1 / 22, rel=1e-9)  # Erlang C, 3 servers at 1 erlang
    assert sol.value("mean_in_system") == pytest.approx(1 + 1 / 22, rel=1e-9)
    with pytest.raises(ConcurError) as err:
        concur.solve(["mean_residence"], {**given, "mean_wait": "0.01 s"}, "queueing")
    assert err.value.exit_code == 3 and "mean_wait" in str(err.value)


def test_a_saturated_queue_does_not_pass_the_bounds_check():
    """A mean wait of -2e-10 s (load above the servers) passed [0, inf) by an absolute slack."""
    sol = concur.solve("arrival_rate", {"servers": 2, "service_time": "0.2 s", "mean_wait": "0.01 s"}, "queueing")
    assert sol.value("arrival_rate") == pytest.approx(2.18218, rel=1e-5)


def test_a_service_level_met_at_one_server_answers_the_fewest():
    """The search answered its 100,000-server bound."""
    given = {"arrival_rate": 1e-6, "service_time": "180 s", "target_time": "20 s", "service_level": 0.8}
    assert concur.solve("servers", given, "queueing").value("servers") <= 3


def test_a_search_that_reaches_its_range_edge_does_not_answer_it():
    """worker_queue answered 2**40 consumers."""
    given = {"bound": 256, "service_time": "0.1096 ms", "queue_delay": "320 ms"}
    try:
        consumers = concur.solve("consumers", given, "worker_queue").value("consumers")
    except ConcurError as exc:
        assert exc.exit_code == 3
    else:
        assert consumers < 1e6


@pytest.mark.parametrize("find", ["sliding_window_layers", "pp"])
def test_layer_counts_stay_within_the_model(find):
    """100,000 sliding-window layers for an 80-layer model, pp = 1,024 for 32 layers."""
    m = build_model(["llm_memory"])
    given = {
        "model": "llama-3.1-70b",
        "gpu": "h100-sxm-80gb",
        "tp": 4,
        "weight_dtype": "bf16",
        "kv_dtype": "bf16",
        "context": "8192 token",
        "sliding_window": "128 token",
    }
    for users in (80, 1000, 100_000):
        try:
            sol = solve_model(m, (find,), {**given, "users": users})
        except ConcurError as exc:
            assert exc.exit_code == 3
            continue
        assert sol.value(find) <= 80  # llama-3.1-70b's layers


def test_verify_refuses_values_that_do_not_satisfy_the_pack():
    """The last check before printing: equations by relative residual, limits as inequalities."""
    from concur.errors import InfeasibleError
    from concur.solver.verify import verify

    m = build_model(["queueing"])
    good = concur.solve(
        ["mean_wait", "p_wait"], {"arrival_rate": 1, "service_time": "1 s", "servers": 3}, "queueing"
    ).values
    verify(m, good, {}, {})
    bad = {**good, "mean_wait": good["mean_wait"] * (1 + 1e-4)}
    with pytest.raises(InfeasibleError, match="mean_wait"):
        verify(m, bad, {}, {})
    # a given ceiling is a bound: the model's smaller wait satisfies 'mean_wait = ...' as a limit
    verify(m, {**good, "mean_wait": 100.0}, {"mean_wait": 100.0}, {"mean_wait": "at_most"})
    with pytest.raises(InfeasibleError, match="mean_wait"):
        verify(m, {**good, "mean_wait": 0.01}, {"mean_wait": 0.01}, {"mean_wait": "at_most"})
    with pytest.raises(InfeasibleError, match="whole"):
        verify(m, {**good, "servers": 2.5}, {}, {})
