"""``concur bench NAME``: the benchmarks of :mod:`concur.bench`, each imported only when run.

The group is a :class:`concur.cli.lazy.LazyGroup` over :data:`BENCHMARKS` (name -> module
defining ``command``, by name: the benchmarks sit above the CLI, whose progress bars and
writers they use), so ``concur bench --help`` lists them all without importing any, and a
benchmark's peers (simpy, pyworkforce, redis...) load only when it runs.
"""

from __future__ import annotations

from ..lazy import LazyGroup

__all__ = ["BENCHMARKS", "command"]

BENCHMARKS = {
    "limiter": "concur.bench.limiter",
    "queue": "concur.bench.queue",
    "counter": "concur.bench.counter",
    "deque": "concur.bench.deque",
    "solve": "concur.bench.solve",
    "scale": "concur.bench.scale",
    "sweep": "concur.bench.sweep",
    "erlang": "concur.bench.erlang",
    "export": "concur.bench.export",
    "simulate": "concur.bench.simulate",
    "enginesim": "concur.bench.enginesim",
    "plan": "concur.bench.plan",
    "serve": "concur.bench.serve",
}

command = LazyGroup(
    name="bench",
    lazy_subcommands={name: f"{module}.command" for name, module in BENCHMARKS.items()},
    help="Benchmarks: each prints the machine, the baseline and the measured ratio.",
)
