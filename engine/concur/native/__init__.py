"""Native measurements CPython cannot make, compiled on demand from C shipped here.

Under the GIL, Python threads never increment in parallel, so cache-line
transfer, false sharing and memory ordering are invisible from Python.  Two
small C programs in this package measure them:

* ``counter_bench.c`` -- increments/s of one shared atomic vs per-thread shards
  padded to 128 B vs unpadded adjacent shards (8 B apart), relaxed vs seq_cst.
* ``deque_bench.c`` -- a divide-and-conquer job run through a deque LIFO (the
  work-stealing owner's order) vs FIFO (breadth-first): time and peak length.

They are compiled with the system C compiler (``$CC``, else ``cc``, ``gcc``,
``clang``) into ``native/`` of concur's cache folder (:func:`concur.cache.cache_dir`:
``$CONCUR_CACHE_DIR``, else ``$XDG_CACHE_HOME/concur`` or ``~/.cache/concur``), named by
the sha256 of the source, the compiler and the flags.  A cached binary is *executed*,
so it is trusted only when

* its folder is private (owned by this user, writable by no one else:
  :func:`concur.cache.is_private`) -- otherwise builds go to a private per-user folder in
  the temp directory, or to a fresh private temp folder for this process;
* it is a regular file owned by this user that no one else can write, and
* its record (``NAME-KEY.json``, written after the build) names the same source digest and
  the sha256 of the binary's bytes: a truncated, swapped or foreign binary is rebuilt.

A binary is written to a temporary name and renamed into place, so a crashed build never
leaves a half-written executable.  :class:`NativeBuildError` (a
:class:`~concur.errors.ConcurError`) says what is missing when no compiler exists or
compilation fails.

This module imports nothing heavy; ``statistics`` gives medians.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from concur import cache
from concur.errors import ConcurError

__all__ = [
    "CounterRow",
    "DequeRow",
    "NativeBuildError",
    "build",
    "cache_dir",
    "counter_table",
    "deque_table",
    "find_compiler",
    "run_counter",
    "run_deque",
]

FLAGS = {
    "counter_bench": ["-O2", "-pthread", "-std=c11"],
    "deque_bench": ["-O2", "-ftree-vectorize", "-std=c11"],
}
MODES = ("shared", "padded", "adjacent")
ORDERS = ("relaxed", "seq_cst")


class NativeBuildError(ConcurError, RuntimeError):
    """No C compiler, or a native benchmark failed to compile or run."""


def find_compiler() -> str:
    """Path of the C compiler to use: ``$CC`` if set, else the first of cc, gcc, clang on PATH.

    Raises :class:`NativeBuildError` when none is found.
    """
    env = os.environ.get("CC")
    candidates = [env] if env else ["cc", "gcc", "clang"]
    for name in candidates:
        path = shutil.which(name)
        if path:
            return path
    raise NativeBuildError(
        f"no C compiler found (looked for {', '.join(candidates)} on PATH)",
        hint="install one (Debian/Ubuntu: apt-get install gcc) or set CC, or run the benchmark with --no-native",
    )


def cache_dir() -> Path:
    """Where native binaries are cached: ``native/`` in concur's cache folder (not created here)."""
    return cache.cache_dir() / "native"


_PROCESS_DIR: Path | None = None  # a fresh private folder, when no cached one can be trusted


def _build_dir() -> Path:
    """A private folder to build into and run from (see the module docstring)."""
    global _PROCESS_DIR
    preferred = cache_dir()
    with contextlib.suppress(OSError):
        preferred.mkdir(parents=True, exist_ok=True, mode=0o700)
    if cache.is_private(preferred):
        return preferred
    fallback = cache.private_dir("native")
    if fallback is not None:
        return fallback
    if _PROCESS_DIR is None:
        _PROCESS_DIR = Path(tempfile.mkdtemp(prefix="concur-native-"))
    return _PROCESS_DIR


def _trusted(exe: Path, record: Any, source_digest: str) -> bool:
    """True when ``exe`` is ours, writable only by us, and the binary its record describes."""
    try:
        st = os.lstat(exe)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return False
    if (
        not isinstance(record, dict)
        or set(record) != {"source_sha256", "binary_sha256"}
        or record["source_sha256"] != source_digest
    ):
        return False
    return bool(record["binary_sha256"] == hashlib.sha256(exe.read_bytes()).hexdigest())


def _record(data: Any) -> dict[str, str]:
    if not (isinstance(data, dict) and all(isinstance(v, str) for v in data.values())):
        raise ValueError("native build record")
    return data


def build(name: str) -> Path:
    """Compile the shipped ``NAME.c`` (once per source/flags/compiler) and return the executable.

    A cached binary is reused only when it passes the checks in the module docstring.
    Raises :class:`NativeBuildError` if there is no compiler or compilation fails.
    """
    if name not in FLAGS:
        raise NativeBuildError(f"unknown native benchmark {name!r}", hint=f"expected one of {sorted(FLAGS)}")
    source = resources.files(__package__).joinpath(f"{name}.c").read_bytes()
    cc = find_compiler()
    flags = FLAGS[name]
    source_digest = cache.digest(source, cc, *flags)
    target_dir = _build_dir()
    exe = target_dir / f"{name}-{source_digest[:16]}"
    record_path = exe.with_name(exe.name + ".json")
    if _trusted(exe, cache.read_json(record_path, "native", _record), source_digest):
        return exe
    with tempfile.TemporaryDirectory(dir=target_dir) as tmp:
        src = Path(tmp) / f"{name}.c"
        src.write_bytes(source)
        out = Path(tmp) / name
        proc = subprocess.run([cc, *flags, "-o", str(out), str(src)], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise NativeBuildError(
                f"compiling {name}.c with {cc} {' '.join(flags)} failed (exit {proc.returncode}): "
                f"{proc.stderr.strip()[-800:]}",
                hint="check that the compiler supports C11 atomics and pthreads, or use --no-native",
            )
        os.chmod(out, 0o755)
        binary_digest = hashlib.sha256(out.read_bytes()).hexdigest()
        os.replace(out, exe)
    cache.write_json(record_path, "native", {"source_sha256": source_digest, "binary_sha256": binary_digest})
    return exe


def _run(exe: Path, args: list[str], timeout: float) -> list[str]:
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise NativeBuildError(f"{exe.name} {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout.split()


def run_counter(mode: str, order: str, threads: int, ms: int = 100) -> float:
    """One run of counter_bench: total increments per second across ``threads`` threads."""
    if mode not in MODES or order not in ORDERS:
        raise NativeBuildError(f"counter mode {mode!r}/order {order!r}", hint=f"modes {MODES}, orders {ORDERS}")
    fields = _run(build("counter_bench"), [mode, order, str(threads), str(ms)], timeout=30 + ms / 1000)
    return float(fields[5])


def run_deque(order: str, megabytes: int, leaf: int) -> tuple[float, int, int]:
    """One run of deque_bench: (seconds, tasks, peak deque length)."""
    if order not in ("lifo", "fifo"):
        raise NativeBuildError(f"deque order {order!r}", hint="expected 'lifo' or 'fifo'")
    fields = _run(build("deque_bench"), [order, str(megabytes), str(leaf)], timeout=120)
    return float(fields[5]), int(fields[3]), int(fields[4])


@dataclass(frozen=True)
class CounterRow:
    """Median and spread (min, max) of increments/s over ``runs`` runs of one configuration."""

    mode: str
    order: str
    threads: int
    median: float
    low: float
    high: float
    runs: int


@dataclass(frozen=True)
class DequeRow:
    """Median and spread (min, max) of seconds for one deque order and array size."""

    order: str
    megabytes: int
    leaf: int
    tasks: int
    max_deque: int
    median: float
    low: float
    high: float
    runs: int


def counter_table(
    threads: list[int], *, runs: int = 5, ms: int = 100, orders: tuple[str, ...] = ORDERS
) -> list[CounterRow]:
    """Measure every mode x order x thread count; runs are interleaved so drift hits all alike."""
    samples: dict[tuple[str, str, int], list[float]] = {}
    for _ in range(runs):
        for order in orders:
            for mode in MODES:
                for n in threads:
                    samples.setdefault((mode, order, n), []).append(run_counter(mode, order, n, ms))
    return [
        CounterRow(mode, order, n, statistics.median(v), min(v), max(v), len(v))
        for (mode, order, n), v in samples.items()
    ]


def deque_table(sizes: list[int], *, leaf: int = 4096, runs: int = 5) -> list[DequeRow]:
    """Measure LIFO and FIFO for each array size (MiB), runs interleaved."""
    samples: dict[tuple[str, int], list[tuple[float, int, int]]] = {}
    for _ in range(runs):
        for mb in sizes:
            for order in ("lifo", "fifo"):
                samples.setdefault((order, mb), []).append(run_deque(order, mb, leaf))
    rows = []
    for (order, mb), v in samples.items():
        secs = [s for s, _, _ in v]
        rows.append(DequeRow(order, mb, leaf, v[0][1], v[0][2], statistics.median(secs), min(secs), max(secs), len(v)))
    return rows
