"""``concur bench limiter``'s Redis section runs, measures three contenders and voids a run with outages."""

from __future__ import annotations

import math

import pytest

redis = pytest.importorskip("redis")
pytestmark = pytest.mark.redis


def test_redis_section_measures_the_bucket_and_both_bare_round_trips(redis_url):
    from concur.bench.limiter import _on_redis

    rows, note = _on_redis(redis_url, iterations=50, repeats=2)
    assert [name for name, _, _ in rows] == [
        "RedisTokenBucket.try_acquire",
        "bare EVALSHA 'return 1', redis-py",
        "bare EVALSHA 'return 1', raw socket",
    ]
    assert all(0 < best <= median < math.inf for _, best, median in rows)
    assert note.endswith("outages during the run: 0")
