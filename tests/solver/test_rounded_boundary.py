"""A value reached only by inverting a ceil or floor is the boundary of what the given count allows,
whatever else is asked.

Given 3 replicas of 50 requests at 70 % utilization, ``replicas = ceil(in_flight / 35)`` allows any
in_flight in (70, 105]: a forward formula over it (``replica_rate = per_replica_concurrency /
residence_time``) has no unique value. It is answered as the search for the boundary ("smallest
replica_rate giving replicas at most 3"), the same answer it gets when residence_time is asked with it;
it had been a point root-finding happened to land on inside the interval (2,805 request/s/replica),
and asking back for the arrival rate from it gave 5,891 request/s, not the 5,000 it came from.
"""

from __future__ import annotations

from typing import Any

import pytest

import concur

GIVEN = {"per_replica_concurrency": "50 request/replica", "utilization": 0.7, "replicas": 3}


def _solve(find: list[str], **given: object) -> Any:
    return concur.solve(packs=["littles_law"], find=find, given={**GIVEN, **given})


def test_the_answer_does_not_depend_on_what_else_is_asked() -> None:
    alone = _solve(["replica_rate"], arrival_rate="5000 request/s")
    together = _solve(["replica_rate", "residence_time"], arrival_rate="5000 request/s")
    rate = alone.value("replica_rate", "request/s/replica")
    assert rate == pytest.approx(together.value("replica_rate", "request/s/replica"), rel=1e-6)
    assert rate == pytest.approx(50 / 0.021, rel=1e-6)  # residence at the boundary: in_flight 105


def test_asking_back_returns_the_rate_it_came_from() -> None:
    rate = _solve(["replica_rate"], arrival_rate="5000 request/s").value("replica_rate", "request/s/replica")
    back = _solve(["arrival_rate"], replica_rate=f"{rate!r} request/s/replica")
    assert back.value("arrival_rate", "request/s") == pytest.approx(5000, rel=1e-4)
