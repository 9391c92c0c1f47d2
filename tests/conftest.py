"""Fixtures shared across the suite: a private cache key, what the plot functions would save, and
private redis-servers on loopback (one per session and worker, private ones per test, a cluster).

Parallel workers (pytest-xdist, ``-n 2``) share nothing: temporary paths come from ``tmp_path``
(one base folder per worker), the cache key from ``own_cache_key``, and every redis-server a worker
starts listens on a port of that worker's own block (:class:`WorkerPorts`). A module's tests run on
one worker, so a module-scoped fixture (a LibreOffice batch, a built wheel, a browser) is built
once (:func:`pytest_xdist_make_scheduler`).
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import require_tool

#: Modules handed to the parallel workers first, longest first (LibreOffice batches, the fuzzers'
#: llm_fleet cases, mypy, a wheel, a browser), so that no worker is left running one alone at the end.
LONGEST_FIRST = (
    "tests/solver/test_fuzz_solve_back.py",
    "tests/excel/test_export.py",
    "tests/solver/test_fuzz_every_pack.py",
    "tests/excel/test_fleet_workbook.py",
    "tests/formulas/test_fleet_backward.py",
    "tests/test_typecheck.py",
    "tests/cli/test_serve_browser.py",
    "tests/test_packaging.py",
    "tests/primitives/test_redis_outage_fleet.py",
    "tests/excel/test_live_workbooks.py",
    "tests/excel/test_recalc.py",
)

#: Modules whose tests share no module-scoped fixture: their tests are spread over the workers one
#: by one. Every other module runs whole on one worker, so a module-scoped fixture (a LibreOffice
#: batch, a wheel, a browser, a server) is built once per run, not once per worker.
SPREAD = frozenset(
    (
        "tests/solver/test_fuzz_solve_back.py",
        "tests/solver/test_fuzz_every_pack.py",
        "tests/test_docs.py",
    )
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under parallel workers (``-n``) the :data:`LONGEST_FIRST` modules come first (the order the
    scheduler hands work out in); a serial run keeps pytest's order."""
    if hasattr(config, "workerinput"):
        rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.hookimpl(optionalhook=True)  # a plain pytest (no pytest-xdist) runs the suite serially
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scheduler, one work unit per module (per test in :data:`SPREAD`), in the
    workers' collection order. (``--dist loadgroup`` cannot do it: pytest 9 ignores the group suffix
    pytest-xdist 3.8 writes into node ids.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in SPREAD else module

    config.option.loadscopereorder = False  # keep LONGEST_FIRST's order, not the test counts'
    return ModuleScheduling(config, log)


@pytest.fixture
def drawn(monkeypatch):
    """What the plot functions would save, one dict per axes: labels, title, legend entries, texts,
    lines (label, marker, x, y) and the X marks ((x, y) of each marker 'X' with data)."""
    import concur.analysis.plot as plot

    seen: list[dict] = []

    def capture(fig, path):
        for ax in fig.axes:
            legend = ax.get_legend()
            lines = [(ln.get_label(), ln.get_marker(), ln.get_xdata(), ln.get_ydata()) for ln in ax.get_lines()]
            seen.append(
                {
                    "xlabel": ax.get_xlabel(),
                    "ylabel": ax.get_ylabel(),
                    "title": ax.get_title(),
                    "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
                    "texts": [t.get_text() for t in ax.texts],
                    "lines": lines,
                    "marks": [(float(x[0]), float(y[0])) for _, m, x, y in lines if m == "X" and len(x)],
                }
            )
        return path

    monkeypatch.setattr(plot, "save_png", capture)
    return seen


@pytest.fixture
def own_cache_key(tmp_path, monkeypatch):
    """This test (and the concur it runs in-process or as a child) keys the cache with a key of its
    own, kept under ``tmp_path/config``: never the user's key, never one an earlier test made."""
    from concur import cache as cachefiles

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(cachefiles, "_KEY", None)
    monkeypatch.setattr(cachefiles, "_KEY_DURABLE", False)


class WorkerPorts:
    """Loopback ports for the redis-servers of one test process: a block of its own per xdist
    worker (``gw0``, ``gw1``, ...), below the kernel's ephemeral range (32768 and up, where
    ``bind(0)`` picks), so two workers never pick the same port, nor does a port a stopped server
    will restart on come back to another worker. A port some other program holds is passed over.
    """

    BASE, BLOCK, BLOCKS = 12000, 800, 25  # 12000 + 25 * 800 = 32000 < 32768

    def __init__(self, worker: str) -> None:
        index = int(worker[2:]) if worker[2:].isdigit() else 0
        self.start = self.BASE + (index % self.BLOCKS) * self.BLOCK
        self.next = random.randrange(self.BLOCK)  # two test runs at once rarely start on one port

    def __call__(self) -> int:
        for _ in range(self.BLOCK):
            port = self.start + self.next
            self.next = (self.next + 1) % self.BLOCK
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
        raise OSError(f"no free loopback port in {self.start}..{self.start + self.BLOCK - 1}")


@pytest.fixture(scope="session", autouse=True)
def worker_ports() -> Iterator[None]:
    """Every redis-server this process starts (fixtures, tests, ``concur bench``) takes its port
    from this worker's block."""
    from concur.bench import redis_server

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(redis_server, "free_port", WorkerPorts(os.environ.get("PYTEST_XDIST_WORKER", "gw0")))
        yield


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a private redis-server on 127.0.0.1, no persistence; stopped afterwards."""
    require_tool("redis-server")
    pytest.importorskip("redis")
    from concur.bench.redis_server import RedisUnavailable, local_redis

    try:
        with local_redis(tmp_path_factory.mktemp("redis")) as url:
            yield url
    except RedisUnavailable as exc:
        pytest.fail(str(exc))


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[object]:
    import redis

    client = redis.Redis.from_url(url=redis_url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def redis_server(tmp_path) -> Iterator[Callable[..., Any]]:
    """Factory: ``redis_server(*options)`` starts a private redis-server (a ``RedisServer``
    that the test may freeze, restart or reconfigure); all are stopped after the test."""
    require_tool("redis-server")
    pytest.importorskip("redis")
    from concur.bench.redis_server import RedisServer, RedisUnavailable

    started: list[RedisServer] = []

    def start(*options: str) -> RedisServer:
        server = RedisServer(tmp_path / f"redis{len(started)}", options)
        started.append(server)
        try:
            return server.start()
        except RedisUnavailable as exc:
            pytest.fail(str(exc))

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    """Three primaries of a Redis Cluster on loopback (16384 slots split in thirds)."""
    require_tool("redis-server")
    pytest.importorskip("redis")
    from concur.bench.redis_server import RedisUnavailable, local_cluster

    try:
        with local_cluster(tmp_path_factory.mktemp("cluster")) as servers:
            yield servers
    except RedisUnavailable as exc:
        pytest.fail(str(exc))
