"""Benchmarks behind ``concur bench NAME``: one module each, defining ``command``.

Every benchmark prints the machine's core count, the baseline it is measured
against, and the ratio, measured in one run. The registry of names is the CLI
group's (:data:`concur.cli.commands.bench.BENCHMARKS`), re-exported here.
"""

from ..cli.commands.bench import BENCHMARKS

__all__ = ["BENCHMARKS"]
