"""Reference implementations of the runtime primitives concur's packs size.

This package imports nothing else of concur and nothing heavy (no sympy, pint,
openpyxl, numpy): ``import concur.primitives`` stays cheap, which a test checks.
Names are loaded on first use so that one primitive's optional dependency
(``redis``) never taxes another.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the type checker sees the real classes; at run time __getattr__ loads them on first use
    from .circuit_breaker import CircuitBreaker, CircuitOpenError
    from .redis_bucket import RedisTokenBucket
    from .sharded_counter import LockedCounter, ShardedCounter
    from .token_bucket import AsyncTokenBucket, Decision, TokenBucket, ratelimit_headers, retry_after_header
    from .worker_queue import BoundedQueue, PoolFull, PoolMisuse, PoolShutdown, QueueEmpty, WorkerPool
    from .ws_deque import Steal, WorkStealingDeque, WorkStealingPool

_EXPORTS = {
    "Decision": "token_bucket",
    "TokenBucket": "token_bucket",
    "AsyncTokenBucket": "token_bucket",
    "retry_after_header": "token_bucket",
    "ratelimit_headers": "token_bucket",
    "RedisTokenBucket": "redis_bucket",
    "CircuitBreaker": "circuit_breaker",
    "CircuitOpenError": "circuit_breaker",
    "WorkerPool": "worker_queue",
    "BoundedQueue": "worker_queue",
    "PoolShutdown": "worker_queue",
    "PoolFull": "worker_queue",
    "QueueEmpty": "worker_queue",
    "PoolMisuse": "worker_queue",
    "ShardedCounter": "sharded_counter",
    "LockedCounter": "sharded_counter",
    "WorkStealingDeque": "ws_deque",
    "Steal": "ws_deque",
    "WorkStealingPool": "ws_deque",
}

__all__ = [
    "AsyncTokenBucket",
    "BoundedQueue",
    "CircuitBreaker",
    "CircuitOpenError",
    "Decision",
    "LockedCounter",
    "PoolFull",
    "PoolMisuse",
    "PoolShutdown",
    "QueueEmpty",
    "RedisTokenBucket",
    "ShardedCounter",
    "Steal",
    "TokenBucket",
    "WorkStealingDeque",
    "WorkStealingPool",
    "WorkerPool",
    "ratelimit_headers",
    "retry_after_header",
]  # the keys of _EXPORTS, sorted (a test checks)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'concur.primitives' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
