"""Shared fixtures for the primitives tests: a fake clock, a switch-interval guard, a closed port,
a fleet of processes, a virtual-time event loop (the redis-servers are in tests/conftest.py)."""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import require_tool


class FakeClock:
    """A clock that moves only when told; ``sleep`` advances it and logs the sleep."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.log: list[str] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.log.append(f"S{seconds:.2f}")
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Run the test with a 1 µs GIL switch interval, restoring the old one after."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@pytest.fixture
def closed_port() -> int:
    """A loopback port nobody listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def openssl_exe() -> str:
    """Path of the openssl command (certificates for the TLS test)."""
    return require_tool("openssl")


def _server_time_us(client: Any) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1_000_000 + int(micros)


@pytest.fixture
def fleet() -> Callable[..., tuple[list[Any], float]]:
    """``fleet(target, args, processes, clock_client)`` runs ``target(*args, barrier, results)`` in
    fresh (spawned) processes and returns what each put on ``results`` and the seconds of server
    time that contain every decision.

    Workers connect and load the script, then wait on the barrier; the server's TIME is read
    (through ``clock_client``) before the barrier opens and after the last worker is done, so
    ``capacity + rate * elapsed`` bounds the admissions whatever the machine's speed: no wall-clock
    window, no fixed start offset.
    """

    def run(target: Callable[..., None], args: tuple[Any, ...], processes: int, clock_client: Any):
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(processes + 1)
        results = ctx.Queue()
        workers = [ctx.Process(target=target, args=(*args, barrier, results)) for _ in range(processes)]
        for w in workers:
            w.start()
        begin = _server_time_us(clock_client)  # no decision yet: the workers wait for us at the barrier
        barrier.wait(timeout=120)
        outcomes = [results.get(timeout=120) for _ in workers]
        for w in workers:
            w.join(timeout=60)
            assert w.exitcode == 0
        return outcomes, (_server_time_us(clock_client) - begin) / 1e6

    return run


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is a :class:`FakeClock`: where a real loop would
    block in ``select`` until the next timer, this one advances the clock to it at once.
    Timers therefore fire in due order at exact fake times, with no real waiting. A loop
    with nothing scheduled and nothing ready would block forever: that is a failure."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self._fake_clock = clock
        real_select = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> Any:
            if timeout is None:
                raise AssertionError("the event loop would block forever: nothing is scheduled")
            if timeout > 0:
                clock.advance(timeout)
            return real_select(0)

        self._selector.select = select  # type: ignore[attr-defined]

    def time(self) -> float:
        return self._fake_clock.now


@pytest.fixture
def run_virtual(clock: FakeClock) -> Callable[[Any], Any]:
    """``run_virtual(coro)``: run ``coro`` to completion on a fresh :class:`VirtualTimeLoop`
    whose time is the ``clock`` fixture."""

    def run(coro: Any) -> Any:
        loop = VirtualTimeLoop(clock)
        try:
            return loop.run_until_complete(coro)
        finally:
            loop.close()

    return run


@pytest.fixture
def virtual_loop(clock: FakeClock) -> Callable[[], VirtualTimeLoop]:
    """``virtual_loop()``: a new :class:`VirtualTimeLoop` over the ``clock`` fixture (the caller closes it)."""
    return lambda: VirtualTimeLoop(clock)
