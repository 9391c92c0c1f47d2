"""Private redis-servers on 127.0.0.1 for benchmarks and tests: one server, or a three-master cluster.

No persistence (``--save ''``, no AOF), bound to loopback only, on a free port, and always
stopped when the ``with`` block ends. Readiness is checked with a raw ``PING`` so that the
redis client package is not needed to start a server (a server with ``requirepass`` answers
NOAUTH, which also means "up").

``RedisServer`` can be stopped and started again on the same port (its data and script cache
are lost, as in a real restart) and frozen with SIGSTOP / thawed with SIGCONT, which is how the
fault tests simulate a hung server. ``local_cluster`` starts three ``--cluster-enabled`` servers,
gives each a third of the 16384 slots with ``CLUSTER ADDSLOTSRANGE``, joins them with
``CLUSTER MEET`` and waits until every node reports ``cluster_state:ok`` and knows all slots.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

__all__ = ["RedisServer", "RedisUnavailable", "free_port", "local_cluster", "local_redis"]


class RedisUnavailable(RuntimeError):
    """redis-server is not installed, or did not answer PING in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pong(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            reply = conn.recv(64)
            return reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH")
    except OSError:
        return False


class RedisServer:
    """One redis-server process on 127.0.0.1:``port`` (a free port unless given).

    ``args``: extra command-line options, e.g. ``["--requirepass", "s3cret"]``.
    ``workdir``: its working directory (cluster nodes keep ``nodes.conf`` there).
    Use as a context manager, or call ``start``/``stop``. Raises ``RedisUnavailable``.
    """

    def __init__(
        self,
        workdir: str | Path | None = None,
        args: Sequence[str] = (),
        port: int | None = None,
        timeout: float = 10.0,
    ) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RedisUnavailable("redis-server is not on PATH (Debian: apt-get install redis-server)")
        self.exe = exe
        self.port = port if port is not None else free_port()
        self.workdir = Path(workdir) if workdir is not None else None
        self.args = list(args)
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RedisUnavailable(f"redis-server on port {self.port} is not running")
        return self.proc.pid

    def start(self) -> RedisServer:
        """Start the process and wait until it answers PING (or NOAUTH)."""
        args = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        log: Path | None = None
        if self.workdir is not None:
            self.workdir.mkdir(parents=True, exist_ok=True)
            log = self.workdir / "redis.log"
            args += ["--dir", str(self.workdir), "--logfile", str(log)]
        self.proc = subprocess.Popen(args + self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + self.timeout
        while not _pong(self.port):
            code = self.proc.poll()
            if code is not None or time.monotonic() > deadline:
                self.stop()
                what = f"exited with status {code}" if code is not None else f"did not answer PING in {self.timeout} s"
                tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log and log.exists() else []
                raise RedisUnavailable(
                    f"redis-server on port {self.port} {what} (options: {' '.join(self.args) or 'none'}); "
                    f"log: {' | '.join(tail) or 'none'}"
                )
            time.sleep(0.02)
        return self

    def freeze(self) -> None:
        """SIGSTOP: the process stops; the kernel still accepts TCP connections for it."""
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT: the process runs again and answers what queued up meanwhile."""
        os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Terminate the process (thawing it first); its data and script cache are lost."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        """Stop and start again on the same port."""
        self.stop()
        self.start()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def local_redis(workdir: str | Path | None = None, timeout: float = 10.0, args: Sequence[str] = ()) -> Iterator[str]:
    """Start redis-server, yield its URL (``redis://127.0.0.1:PORT/0``), stop it afterwards.

    Raises :class:`RedisUnavailable` when the server is missing or does not come up.
    """
    with RedisServer(workdir, args, timeout=timeout) as server:
        yield server.url


@contextmanager
def local_cluster(workdir: str | Path, masters: int = 3, timeout: float = 30.0) -> Iterator[list[RedisServer]]:
    """Start a Redis Cluster of ``masters`` primaries (no replicas) and yield its servers.

    Needs the redis package (the setup commands go through redis-py). Raises
    ``RedisUnavailable`` when a server does not start or the cluster does not converge.
    """
    import redis

    # the bus ports are chosen too: the default, port + 10000, may be taken or above 65535
    bus_ports = [free_port() for _ in range(masters)]
    with ExitStack() as stack:
        servers = [
            stack.enter_context(
                RedisServer(
                    Path(workdir) / f"node{i}",
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-port",
                        str(bus_ports[i]),
                        "--cluster-node-timeout",
                        "5000",
                    ],
                )
            )
            for i in range(masters)
        ]
        clients = [stack.enter_context(redis.Redis(port=s.port, socket_timeout=5)) for s in servers]
        bounds = [round(16384 * i / masters) for i in range(masters + 1)]
        for i, client in enumerate(clients):
            client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", bounds[i], bounds[i + 1] - 1)
        for server, bus_port in zip(servers[1:], bus_ports[1:]):
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", server.port, bus_port)
        deadline = time.monotonic() + timeout
        while True:
            infos = [client.execute_command("CLUSTER", "INFO").decode() for client in clients]
            if all(
                "cluster_state:ok" in info
                and f"cluster_known_nodes:{masters}" in info
                and "cluster_slots_assigned:16384" in info
                for info in infos
            ):
                break
            if time.monotonic() > deadline:
                raise RedisUnavailable(f"the {masters}-node cluster did not converge in {timeout} s: {infos[0]}")
            time.sleep(0.05)
        yield servers
