"""Erlang B on large loads starts its recurrence 40 sqrt(A) below min(c, A) from the fluid limit
and stops where B underflows: the same doubles as the recurrence from 0, at a fraction of the steps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from concur.maths import erlang


def _from_zero(c: int, load: float) -> float:
    b = 1.0
    for k in range(1, c + 1):
        ab = load * b
        b = ab / (k + ab)
    return b


CASES = [
    (c, a)
    for a in (1_599.0, 2_000.0, 12_345.6, 150_000.0)
    for c in (1, int(a / 2), int(a - 45 * math.sqrt(a)), int(a) - 1, int(a), int(a + 3 * math.sqrt(a)), int(3 * a))
    if c >= 1
]


@pytest.mark.parametrize(("servers", "load"), CASES)
def test_the_short_recurrence_gives_the_same_doubles(servers: int, load: float) -> None:
    assert erlang.erlang_b(servers, load) == _from_zero(servers, load)


def test_the_array_version_starts_where_the_scalar_does() -> None:
    c = np.array([float(s) + 0.25 for s, _ in CASES])
    a = np.array([a for _, a in CASES])
    expected = np.array([erlang.erlang_b(s, x) for s, x in zip(c, a, strict=True)])
    assert np.array_equal(erlang.erlang_b_array(c, a), expected)


def test_a_million_servers_start_forty_thousand_below() -> None:
    k0, start = erlang._recurrence_start(1_000_000, 1e6)
    assert k0 == 960_000 and start == pytest.approx(0.04, rel=1e-12)
    assert erlang._recurrence_start(500, 1_000.0) == (0, 1.0)  # below 1,600 erlang: from 0 as always
