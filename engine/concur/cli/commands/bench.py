"""``concur bench NAME``: the benchmarks of :mod:`concur.bench`, each imported only when run.

The group is a :class:`concur.cli.lazy.LazyGroup` over :data:`concur.bench.BENCHMARKS`
(name -> module defining ``command``), so ``concur bench --help`` lists them all without
importing any, and a benchmark's peers (simpy, pyworkforce, redis...) load only when it runs.
"""

from __future__ import annotations

from ...bench import BENCHMARKS
from ..lazy import LazyGroup

__all__ = ["command"]

command = LazyGroup(name="bench", lazy_subcommands={name: f"{module}.command" for name, module in BENCHMARKS.items()},
                    help="Benchmarks: each prints the machine, the baseline and the measured ratio.")
