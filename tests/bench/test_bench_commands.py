"""Every ``concur bench`` sub-command runs at tiny sizes and prints its peer and a ratio.

Nothing here asserts a speed: the figures are whatever a shared CI machine gives. What is
checked is that each benchmark runs to the end through the real CLI, names what it stands
against, and prints the ratio between the two (``1.23x``) -- the contract of the bench
group. A benchmark added to ``BENCHMARKS`` without a row here fails
``test_every_benchmark_has_a_tiny_run``.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from concur.bench import BENCHMARKS
from concur.cli import cli

# name -> (tiny options, text naming the peer, ...)
TINY: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "limiter": (
        [
            "--iterations",
            "200",
            "--repeats",
            "1",
            "--redis-iterations",
            "20",
            "--contended-admissions",
            "200",
            "--contended-repeats",
            "1",
        ],
        (
            "limits moving window",
            "pyrate-limiter",
            "aiolimiter AsyncLimiter.acquire",
            "concur / aiolimiter",
            "concur / aiolimiter CPU at 1,000 waiting tasks",
        ),
    ),
    "queue": (
        ["--iterations", "200", "--items", "200", "--repeats", "1", "--workers", "2", "--bound", "8", "--work", "10"],
        ("queue.Queue(1024)", "ThreadPoolExecutor.submit", "WorkerPool.submit / ThreadPoolExecutor.submit"),
    ),
    "counter": (
        ["--no-native", "--runs", "1", "--ops", "1000", "--max-threads", "1"],
        ("peer: an int under a threading.Lock", "ShardedCounter / int+lock"),
    ),
    "deque": (
        [
            "--no-native",
            "--runs",
            "1",
            "--n",
            "20000",
            "--leaf",
            "1000",
            "--max-workers",
            "2",
            "--fib",
            "8",
            "--owner-ops",
            "2000",
        ],
        (
            "ThreadPoolExecutor / pool",
            "peer ThreadPoolExecutor",
            "multiprocessing.Pool",
            "WorkStealingDeque / deque+Lock",
        ),
    ),
    "solve": (["--runs", "1"], ("python -c pass", "x bare")),
    "scale": (
        ["--runs", "1", "--size", "40", "--recurrence", "30"],
        ("peer: the same chain solved forwards", "backward / forward", "(exact)"),
    ),
    "sweep": (["--points", "1000", "--runs", "1"], ("hand-written numpy", "ratio")),
    "erlang": (
        ["--runs", "3", "--servers", "50", "--loads", "10", "--exact-max", "50"],
        ("peer: pyworkforce ErlangC", "pyworkforce required_positions"),
    ),
    "export": (
        ["--repeat", "1", "--plan", "synthetic", "--variables", "12"],
        ("baseline (issue budget)", "ratio budget/median"),
    ),
    "plan": (["--runs", "1"], ("one warm `concur solve --find replicas`", "ratio plan / solve")),
    "serve": (["--runs", "1"], ("concur.solve in this process", "POST /api/solve")),
    "simulate": (
        ["--runs", "1", "--duration", "20000"],
        ("peer: SimPy", "SimPy seconds / concur seconds", "combined 95% CI"),
    ),
    "enginesim": (
        ["--runs", "1", "--requests", "60"],
        (
            "baseline (issue budget)",
            "peer: the same simulator one step per event",
            "ratio one-by-one / coalesced",
            "| disagg 1P1D |",
        ),
    ),
}

RATIO = re.compile(r"\d+(?:\.\d+)? ?x\b")


def test_every_benchmark_has_a_tiny_run() -> None:
    assert sorted(TINY) == sorted(BENCHMARKS)


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_bench_runs_and_prints_its_peer_and_a_ratio(name: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CONCUR_NATIVE_CACHE", str(tmp_path / "native"))
    options, peers = TINY[name]
    result = CliRunner().invoke(cli, ["bench", name, *options], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "core" in result.output, result.output  # each names the machine it ran on
    for peer in peers:
        assert peer in result.output, f"{name}: {peer!r} missing from\n{result.output}"
    assert RATIO.search(result.output), f"{name}: no ratio like '1.23x' in\n{result.output}"
    assert "not installed" not in result.output, result.output  # the test extra brings every peer


TINY_LIMITER = ["--iterations", "10", "--repeats", "1", "--contended-admissions", "10", "--contended-repeats", "1"]


@pytest.mark.parametrize(
    "args, says",
    [
        (["queue", "--workers", "0"], "'--workers': 0 is not in the range x>=1"),
        (["queue", "--bound", "0"], "'--bound': 0 is not in the range x>=1"),
        (["queue", "--repeats", "0"], "'--repeats': 0 is not in the range x>=1"),
        (["limiter", *TINY_LIMITER, "--redis-url", "notaurl"], "--redis-url: Redis URL must specify one of"),
        (["simulate", "--rate", "-1", "--runs", "1"], "--rate: must be a finite number > 0, got -1"),
        (["simulate", "--rate", "nan", "--runs", "1"], "--rate: must be a finite number > 0, got nan"),
        (["simulate", "--duration", "1e12", "--runs", "1"], "a simulation takes at most 600,000"),
        (["sweep", "--points", "1000000000"], "--points and --csv-points take at most 10,000,000"),
        (["deque", "--native-mb", "abc"], "'abc' is not a list of whole numbers of MiB"),
        (["deque", "--native-mb", "4,100000"], "each size must be 1 to 4,096 MiB"),
    ],
    ids=[
        "queue-workers",
        "queue-bound",
        "queue-repeats",
        "limiter-url",
        "sim-rate-neg",
        "sim-rate-nan",
        "sim-duration",
        "sweep-points",
        "deque-mb-text",
        "deque-mb-huge",
    ],
)
def test_bench_refuses_bad_options_before_it_runs(args: list[str], says: str) -> None:
    """Each was a traceback (a pool of 0 workers, an empty list of timings, a URL that is not one, a
    size that is not a number -- after minutes of other benchmarks), or a run that never ended
    (SimPy at a rate of nan or for 10^12 s, a sweep of 10^9 points)."""
    result = CliRunner().invoke(cli, ["bench", *args])
    assert result.exit_code == 2 and says in result.output, (result.output, result.exception)
