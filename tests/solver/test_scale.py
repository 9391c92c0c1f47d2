"""Scale: a 1,000-equation chain solved both ways, a 300-term recurrence backwards and across
(a loop of 299 unknowns), a large nonlinear loop refused in one line, 1,000 defaults.

Correctness only: the speed figures live in ``concur bench scale``. Each solve runs in a
subprocess under a generous timeout, a guard against a hang (the 299-unknown loop once sent the
plan compiler into an exponential search), never a speed target.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from concur.bench.scale import chain_pack, chain_value, recurrence_back, recurrence_pack, recurrence_values
from concur.lang.yamlsafe import MAX_BYTES

HANG_GUARD_S = 60

SOLVE = """
import json, sys
import concur
from concur.errors import ConcurError
path, find, given = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
try:
    sol = concur.solve(find, given, path)
except ConcurError as exc:
    print(json.dumps({"error": str(exc), "exit": exc.exit_code}))
else:
    print(json.dumps({"value": sol.value(find), "methods": [str(s.method) for s in sol.trace],
                      "sympy": "sympy" in sys.modules, "numpy": "numpy" in sys.modules}))
"""


def _solve(tmp_path: Path, pack: str, find: str, given: dict[str, float]) -> dict:
    path = tmp_path / (pack.split("\n", 1)[0].split(": ")[1] + ".yaml")
    path.write_text(pack)
    out = subprocess.run(
        [sys.executable, "-c", SOLVE, str(path), find, json.dumps(given)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={**os.environ, "CONCUR_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_generated_packs_fit_one_file():
    assert len(chain_pack(1000).encode()) < MAX_BYTES
    assert len(recurrence_pack(300).encode()) < MAX_BYTES


def test_chain_of_1000_forwards_and_backwards(tmp_path):
    forward = _solve(tmp_path, chain_pack(1000), "x1000", {"x0": 7, "d": 2})
    assert forward["value"] == chain_value(7, 2, 1000) == 2007
    assert forward["methods"].count("forward") == 1000
    backward = _solve(tmp_path, chain_pack(1000), "x0", {"x1000": 2007, "d": 2})
    assert backward["value"] == pytest.approx(7, rel=1e-12)
    assert backward["methods"].count("inverted") == 1000  # every step isolated its unknown...
    assert not backward["sympy"]  # ...without sympy


def test_recurrence_backwards_from_its_last_two(tmp_path):
    got = _solve(tmp_path, recurrence_pack(300), "x0", {"x300": 1, "x299": 1})
    exact = recurrence_back(1, 1, 300)[0]
    assert abs(exact) > 1e61  # backwards the recurrence grows with alternating signs
    assert got["value"] == pytest.approx(exact, rel=1e-9)
    assert not got["sympy"]


def test_recurrence_across_is_a_299_unknown_linear_loop(tmp_path):
    x300 = recurrence_values(3, 5, 300)[300]
    got = _solve(tmp_path, recurrence_pack(300), "x1", {"x0": 3, "x300": float(x300)})
    assert got["value"] == pytest.approx(5, rel=1e-9)
    assert got["methods"].count("loop") == 299
    assert not got["sympy"] and not got["numpy"]  # sparse elimination in plain Python


def test_dependent_linear_loop_is_refused(tmp_path):
    """The last equation replaced by another one rewritten (x39 - x38 = x37): the loop of 39
    unknowns still matches structurally, but the linear system is singular."""
    pack = recurrence_pack(40, name="dependent").replace("  - x40 = x39 + x38", "  - x39 - x38 = x37 + [0 token]")
    pack = pack.replace("  x40: {unit: token}\n", "")
    got = _solve(tmp_path, pack, "x1", {"x0": 3})
    assert got["exit"] == 3 and "no unique solution" in got["error"] and "\n" not in got["error"], got


def test_large_nonlinear_loop_answers_or_refuses_in_one_line(tmp_path):
    lines = recurrence_pack(300, name="squares").splitlines()
    pack = (
        "\n".join(
            line.replace("+ x", "+ x1 * x1 / [1 token] + x") if line.startswith("  - x3 ") else line for line in lines
        )
        + "\n"
    )
    assert "x3 = x2 + x1 * x1 / [1 token] + x1" in pack
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "concur.cli",
            "solve",
            str(_write(tmp_path, "squares", pack)),
            "--find",
            "x1",
            "--set",
            "x0=0",
            "--set",
            "x300=5",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={**os.environ, "CONCUR_CACHE_DIR": str(tmp_path)},
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("\n") == 1 and len(proc.stderr) < 600, proc.stderr
    assert "and 291 more" in proc.stderr  # the loop is named, not listed


def test_large_nonlinear_loop_torn_where_its_residual_is_not_the_torn_variables_equation(tmp_path):
    """x_i = sqrt(x_{i-1} x_{i-2}) given both ends: no equation of the matching can be dropped
    with its own unknown to leave a chain, but guessing x1 and checking the last equation can."""
    import math

    lines = ["pack: means", "variables:"] + [f"  x{i}: {{unit: token}}" for i in range(301)]
    lines += ["equations:"] + [f"  - x{i} = sqrt(x{i - 1} * x{i - 2})" for i in range(2, 301)]
    xs = [4.0, 9.0]
    while len(xs) <= 300:
        xs.append(math.sqrt(xs[-1] * xs[-2]))
    got = _solve(tmp_path, "\n".join(lines) + "\n", "x1", {"x0": 4, "x300": xs[300]})
    assert got["value"] == pytest.approx(9, rel=1e-6)
    assert "tear" in got["methods"]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_a_thousand_defaults(tmp_path):
    """Every step's increment has a default: the defaults loop must not re-match per default."""
    lines = ["pack: steps", "variables:"] + [f"  x{i}: {{unit: token}}" for i in range(1001)]
    lines += [f"  d{i}: {{unit: token, default: 2 token}}" for i in range(1, 1001)]
    lines += ["equations:"] + [f"  - x{i} = x{i - 1} + d{i}" for i in range(1, 1001)]
    pack = "\n".join(lines) + "\n"
    assert _solve(tmp_path, pack, "x1000", {"x0": 7})["value"] == 2007
    assert _solve(tmp_path, pack, "x0", {"x1000": 2007})["value"] == pytest.approx(7)


def _specialised(text: str):
    from concur.errors import Location
    from concur.lang.expr import names_in, parse_equation
    from concur.lang.pack import Equation
    from concur.solver.problem import SpecialisedEq

    lhs, rhs = parse_equation(text)
    return SpecialisedEq(
        Equation(text, lhs, rhs, "", Location("t.yaml"), "t", 1), lhs, rhs, names_in(lhs) | names_in(rhs)
    )


def test_linear_rows_read_coefficients_off_the_tree():
    from concur.lang.expr import compile_node
    from concur.solver.closed_forms import linear_rows

    rows = linear_rows([_specialised("x2 = x1 + x0"), _specialised("y = a * (x1 - 2 * x2) / b + c")], ["x1", "x2", "y"])
    env = {"x0": 3.0, "a": 5.0, "b": 2.0, "c": 7.0}
    got = [({k: compile_node(c)(env) for k, c in row.coefficients}, compile_node(row.constant)(env)) for row in rows]
    assert got == [({0: -1.0, 1: 1.0}, -3.0), ({0: -2.5, 1: 5.0, 2: 1.0}, -7.0)]
    assert linear_rows([_specialised("x2 = x1 * x1 + x0")], ["x1", "x2"]) is None  # a square
    assert linear_rows([_specialised("x2 = x0 / x1")], ["x1", "x2"]) is None  # an unknown divides
    assert linear_rows([_specialised("x2 = exp(x1)")], ["x1", "x2"]) is None


def test_sparse_elimination_pivots_and_refuses_singular_systems():
    from concur.solver.blocks import solve_sparse

    # a zero where the first pivot would be: needs a row exchange
    assert solve_sparse([{1: 2.0}, {0: 1.0, 1: 1.0}], [4.0, 5.0], 2) == [3.0, 2.0]
    assert solve_sparse([{0: 1.0, 1: 1.0}, {0: 2.0, 1: 2.0}], [1.0, 2.0], 2) is None
    assert solve_sparse([{0: 1.0}, {0: 1.0}], [1.0, 1.0], 2) is None  # nothing holds the second unknown
