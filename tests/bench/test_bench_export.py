"""The export benchmark runs (timed only with --benchmark-enable; a plain test otherwise)."""

from __future__ import annotations

from click.testing import CliRunner

from concur.bench.export import command, synthetic_plan
from concur.excel.writer import write_workbook


def test_export_benchmark_command_reports_the_ratio():
    result = CliRunner().invoke(command, ["--repeat", "1", "--variables", "12"])
    assert result.exit_code == 0, result.output
    assert "cores:" in result.output and "ratio budget/median" in result.output


def test_export_of_thirty_variables(benchmark, tmp_path):
    plan = synthetic_plan()
    path = tmp_path / "b.xlsx"
    benchmark(write_workbook, plan, path)
    assert path.stat().st_size > 0
