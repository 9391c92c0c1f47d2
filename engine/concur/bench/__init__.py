"""Benchmarks behind ``concur bench NAME``: one module each, defining ``command``.

Every benchmark prints the machine's core count, the baseline it is measured
against, and the ratio, measured in one run.
"""

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
    "plan": "concur.bench.plan",
}
