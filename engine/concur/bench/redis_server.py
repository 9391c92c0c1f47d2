"""A private redis-server on 127.0.0.1 for benchmarks and tests.

No persistence (``--save ''``, no AOF), bound to loopback only, on a free port, and always
stopped when the ``with`` block ends. Readiness is checked with a raw ``PING`` so that the
redis client package is not needed to start it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["free_port", "local_redis", "RedisUnavailable"]


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
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def local_redis(workdir: str | Path | None = None, timeout: float = 10.0) -> Iterator[str]:
    """Start redis-server, yield its URL (``redis://127.0.0.1:PORT/0``), stop it afterwards.

    Raises :class:`RedisUnavailable` when the server is missing or does not come up.
    """
    exe = shutil.which("redis-server")
    if exe is None:
        raise RedisUnavailable("redis-server is not on PATH (Debian: apt-get install redis-server)")
    port = free_port()
    args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    if workdir is not None:
        args += ["--dir", str(workdir)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while not _pong(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RedisUnavailable(f"redis-server did not answer PING on port {port}")
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
