"""Native C benchmarks: build into a fresh private folder, run tiny configurations, clear errors.

Skipped when no C compiler exists, except with CI=true, where that fails.
Nothing here asserts a speed ratio: CI machines are small and shared.
"""

from __future__ import annotations

import os
import shutil

import pytest
from click.testing import CliRunner

from concur import native
from concur.errors import ConcurError


def require_compiler() -> str:
    """Path of the C compiler; skip when missing, fail when CI=true."""
    try:
        return native.find_compiler()
    except native.NativeBuildError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{exc}, and CI=true requires a C compiler", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "native"


def test_missing_compiler_is_a_clear_concur_error(monkeypatch) -> None:
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    with pytest.raises(ConcurError, match="no C compiler found") as info:
        native.build("counter_bench")
    assert "--no-native" in str(info.value)


def test_unknown_benchmark_is_refused() -> None:
    with pytest.raises(native.NativeBuildError, match="unknown native benchmark"):
        native.build("nope")


def test_build_once_per_process_into_a_private_folder_outside_the_cache(cache) -> None:
    require_compiler()
    exe = native.build("counter_bench")
    assert os.access(exe, os.X_OK) and not cache.exists()  # nothing is written to (or read from) the cache
    folder = exe.parent.stat()
    assert folder.st_uid == os.getuid() and folder.st_mode & 0o777 == 0o700
    stamp = exe.stat().st_mtime_ns
    assert native.build("counter_bench") == exe
    assert exe.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("mode", native.MODES)
@pytest.mark.parametrize("order", native.ORDERS)
def test_counter_bench_runs_and_counts_exactly(cache, mode, order) -> None:
    require_compiler()
    # counter_bench itself exits 1 (NativeBuildError here) if any increment was lost.
    assert native.run_counter(mode, order, threads=2, ms=5) > 0


def test_counter_table_has_median_and_spread(cache) -> None:
    require_compiler()
    rows = native.counter_table([1, 2], runs=3, ms=5, orders=("relaxed",))
    assert len(rows) == 3 * 2
    for r in rows:
        assert r.low <= r.median <= r.high and r.runs == 3


def test_deque_bench_space_bounds(cache) -> None:
    require_compiler()
    # 1 MiB of uint32 = 262,144 elements, leaves of 4,096: a full binary tree of depth 6.
    for order, peak in (("lifo", 7), ("fifo", 64)):
        seconds, tasks, max_deque = native.run_deque(order, 1, 4096)
        assert tasks == 127 and max_deque == peak and seconds >= 0


def test_bad_arguments_are_reported(cache) -> None:
    require_compiler()
    with pytest.raises(native.NativeBuildError):
        native.run_counter("diagonal", "relaxed", 1)
    exe = native.build("counter_bench")
    with pytest.raises(native.NativeBuildError, match="THREADS"):
        native._run(exe, ["shared", "relaxed", "0", "5"], timeout=10)


def test_bench_counter_command_tiny(cache) -> None:
    require_compiler()
    from concur.bench.counter import command

    result = CliRunner().invoke(command, ["--runs", "1", "--ops", "2000", "--native-ms", "5", "--max-threads", "2"])
    assert result.exit_code == 0, result.output
    assert "cores:" in result.output
    assert "| relaxed | padded |" in result.output
    assert "ShardedCounter" in result.output and "processes" in result.output


def test_bench_deque_command_tiny(cache) -> None:
    require_compiler()
    from concur.bench.deque import command

    result = CliRunner().invoke(
        command, ["--runs", "1", "--n", "20000", "--leaf", "1000", "--native-mb", "1", "--max-workers", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "| 1 MiB | 127 |" in result.output
    assert "peak deque, owner LIFO" in result.output


def test_no_native_skips_the_compiler(monkeypatch) -> None:
    from concur.bench.counter import command

    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    result = CliRunner().invoke(command, ["--runs", "1", "--ops", "2000", "--no-native", "--max-threads", "1"])
    assert result.exit_code == 0, result.output
    assert "Native" not in result.output
