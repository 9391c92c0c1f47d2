"""Native measurements CPython cannot make, compiled on demand from C shipped here.

Under the GIL, Python threads never increment in parallel, so cache-line
transfer, false sharing and memory ordering are invisible from Python.  Two
small C programs in this package measure them:

* ``counter_bench.c`` -- increments/s of one shared atomic vs per-thread shards
  padded to 128 B vs unpadded adjacent shards (8 B apart), relaxed vs seq_cst.
* ``deque_bench.c`` -- a divide-and-conquer job run through a deque LIFO (the
  work-stealing owner's order) vs FIFO (breadth-first): time and peak length.

They are compiled with the system C compiler (``$CC``, else ``cc``, ``gcc``,
``clang``) into a fresh private folder made for this process (``tempfile.mkdtemp``: ``0700``,
a new random name, removed at exit), once per process. Nothing is ever run from concur's
cache folder or any other folder that outlives the process: a binary or record planted there
(a restored CI cache, a shared folder) is never looked at. Compiling costs well under a
second, once per ``concur bench`` run.

:class:`NativeBuildError` (a :class:`~concur.errors.ConcurError`) says what is missing when no
compiler exists or compilation fails.

This module imports nothing heavy; ``statistics`` gives medians.
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from concur.errors import ConcurError

__all__ = [
    "CounterRow",
    "DequeRow",
    "NativeBuildError",
    "build",
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


_BUILT: dict[tuple[str, str], Path] = {}  # (name, compiler) -> executable built by this process
_PROCESS_DIR: Path | None = None  # this process's private build folder


def _build_dir() -> Path:
    """This process's build folder: made by ``mkdtemp`` (mode 0700, a name no one could predict),
    removed when the process exits; the only folder a native benchmark is run from."""
    global _PROCESS_DIR
    if _PROCESS_DIR is None or not _PROCESS_DIR.is_dir():
        _PROCESS_DIR = Path(tempfile.mkdtemp(prefix="concur-native-"))
        atexit.register(shutil.rmtree, _PROCESS_DIR, True)
    return _PROCESS_DIR


def build(name: str) -> Path:
    """Compile the shipped ``NAME.c`` (once per process) into this process's private folder and
    return the executable. Nothing built by another process is reused (see the module docstring).

    Raises :class:`NativeBuildError` if there is no compiler or compilation fails.
    """
    if name not in FLAGS:
        raise NativeBuildError(f"unknown native benchmark {name!r}", hint=f"expected one of {sorted(FLAGS)}")
    cc = find_compiler()
    built = _BUILT.get((name, cc))
    if built is not None and built.is_file():
        return built
    source = resources.files(__package__).joinpath(f"{name}.c").read_bytes()
    flags = FLAGS[name]
    folder = _build_dir()
    src = folder / f"{name}.c"
    src.write_bytes(source)
    exe = folder / f"{name}-{len(_BUILT)}"  # a new name for each compiler: never overwrite one in use
    proc = subprocess.run([cc, *flags, "-o", str(exe), str(src)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise NativeBuildError(
            f"compiling {name}.c with {cc} {' '.join(flags)} failed (exit {proc.returncode}): "
            f"{proc.stderr.strip()[-300:]}",
            hint="check that the compiler supports C11 atomics and pthreads, or use --no-native",
        )
    _BUILT[name, cc] = exe
    return exe


def _run(exe: Path, args: list[str], timeout: float) -> list[str]:
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise NativeBuildError(
            f"{exe.name} {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
        )
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
