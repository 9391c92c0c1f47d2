"""One numeric policy: ``concur.solver.roots`` is the only home of tolerances, bounds slack and
integer snapping, in ``solver/`` and ``sweep/`` alike (its array versions serve the sweep).

The scan reads every number literal of those packages with ``tokenize`` (docstrings and comments
are not numbers) and refuses, outside the policy module, a float below 1e-3 in magnitude or any
literal written with a negative exponent: a tolerance typed in place is one the next reader will
type differently. The behaviour tests hold the policy's rules themselves.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import numpy as np
import pytest

import concur
from concur.errors import ConcurError
from concur.solver import roots
from concur.solver.roots import (
    BOUNDS_SLACK,
    in_bounds,
    in_bounds_array,
    is_whole,
    snap_integer,
    snap_integer_array,
)

ENGINE = Path(__file__).resolve().parents[2] / "engine" / "concur"
POLICY = ENGINE / "solver" / "roots.py"


def tolerance_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of number literals that look like a tolerance: below 1e-3 or a negative exponent."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.NUMBER:
            continue
        text = tok.string.lower().replace("_", "")
        if text.endswith("j"):
            continue
        try:
            value = float(text) if not text.startswith("0x") else float(int(text, 16))
        except ValueError:
            continue
        if "e-" in text or 0 < abs(value) < 1e-3:
            out.append((tok.start[0], tok.string))
    return out


def test_no_tolerance_literal_outside_the_policy():
    stray = []
    for package in ("solver", "sweep"):
        for path in sorted((ENGINE / package).rglob("*.py")):
            if path == POLICY:
                continue
            for line, text in tolerance_literals(path.read_text()):
                stray.append(f"{path.relative_to(ENGINE.parent)}:{line} {text}")
    assert not stray, "tolerance literals outside concur/solver/roots.py (name them there): " + ", ".join(stray)


def test_the_scan_sees_a_tolerance_and_not_a_docstring():
    sample = '"""bisected to 1e-12"""\nx = abs(a - b) <= 1e-9 * s\ny = 0.0001\nz = 2.5e3 + 0.5 + 1e6\n'
    assert tolerance_literals(sample) == [(2, "1e-9"), (3, "0.0001")]


def test_the_policy_module_names_every_tolerance_it_uses():
    """Inside the policy, a tolerance literal is a named module constant's value, never inline."""
    source = POLICY.read_text()
    named = {
        line for line, _ in tolerance_literals(source) if source.splitlines()[line - 1].split("=")[0].strip().isupper()
    }
    inline = [(line, text) for line, text in tolerance_literals(source) if line not in named]
    doc = [line for line, _ in inline if ">>>" in source.splitlines()[line - 1]]  # doctest examples
    assert [i for i in inline if i[0] not in doc] == []


def test_a_saturated_queue_answers_its_true_rate():
    """A mean wait of -2e-10 s (load above the servers) once passed [0, inf) by an absolute slack
    and the search answered 5e9 request/s; the truth is 2.18218 request/s."""
    sol = concur.solve("arrival_rate", {"servers": 2, "service_time": "0.2 s", "mean_wait": "0.01 s"}, "queueing")
    assert sol.value("arrival_rate") == pytest.approx(2.18218, rel=1e-5)


def test_bounds_slack_is_relative_never_absolute():
    assert not in_bounds((0.0, None), -2e-10)  # nothing at zero to be relative to: exact
    assert not in_bounds((0.0, None), -1e-300)
    assert in_bounds((0.0, None), -1e-17, scale=1.0)  # rounding in 1 - p, p = 1
    assert in_bounds((1.0, None), 1.0 - 0.5 * BOUNDS_SLACK)
    assert not in_bounds((1.0, None), 1.0 - 2 * BOUNDS_SLACK)
    assert not in_bounds((None, 5e9), 5e9 * (1 + 2 * BOUNDS_SLACK))
    values = np.array([-2e-10, -1e-300, 0.0, 1.0, np.nan, 2.0 + 1e-12, 2.1])
    assert in_bounds_array((0.0, 2.0), values).tolist() == [False, False, True, True, False, True, False]
    for v in values[~np.isnan(values)]:
        assert in_bounds((0.0, 2.0), float(v)) == bool(in_bounds_array((0.0, 2.0), np.array([v]))[0])


def test_integer_snapping_is_relative_and_the_same_for_arrays():
    assert snap_integer(2.9999999999) == 3.0 and snap_integer(2.5) == 2.5
    assert snap_integer(3e12 + 1e-3) == 3e12  # relative: a large count rounds its last digits
    assert snap_integer(0.0001) == 0.0001  # ... and a small value is not pulled to zero by an absolute slack
    assert is_whole(2.9999999999) and not is_whole(2.5)
    values = np.array([2.9999999999, 2.5, 3e12 + 1e-3, 0.0001, -4.0000000001])
    assert snap_integer_array(values).tolist() == [snap_integer(float(v)) for v in values]


def test_a_given_count_that_is_not_whole_is_refused_by_the_same_rule():
    with pytest.raises(ConcurError) as err:
        concur.solve("mean_wait", {"servers": 2.5, "service_time": "0.2 s", "arrival_rate": 1}, "queueing")
    assert err.value.exit_code == 2 and "whole number" in str(err.value)
    sol = concur.solve("mean_wait", {"servers": 2.9999999999, "service_time": "0.2 s", "arrival_rate": 1}, "queueing")
    assert sol.value("mean_wait") == pytest.approx(
        concur.solve("mean_wait", {"servers": 3, "service_time": "0.2 s", "arrival_rate": 1}, "queueing").value(
            "mean_wait"
        )
    )


def test_the_policy_is_the_one_module_that_names_them():
    for name in ("RESIDUAL_REL", "BOUNDS_SLACK", "INTEGER_SNAP", "GOAL_REL", "CHECK_REL", "TINY"):
        assert name in roots.__all__
