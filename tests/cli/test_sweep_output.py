"""`concur sweep` output: CSV streamed (to a file or stdout), JSON nulls, a summarised table, plots that
honour --find and mark the real KV limit."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from concur.cli import cli
from concur.cli.tabular import Block, csv_quote, json_column, write_csv, write_table

ARGS = [
    "sweep",
    "llm_throughput",
    "--set",
    "model=llama-3.1-8b",
    "--set",
    "gpu=h100-sxm-80gb",
    "--set",
    "input_tokens=1024",
    "--set",
    "output_tokens=2048",
    "--find",
    "tokens_per_s_per_gpu",
]


def test_write_csv_reads_back_exactly_with_empty_nan_and_quoted_text():
    rng = np.random.default_rng(7)
    x = rng.uniform(-1e6, 1e6, 70_000)  # more than one chunk
    x[[3, 69_999]] = np.nan
    names = np.asarray(["bf16", None, 'odd "one", here'] * 23_333 + ["fp8"], dtype=object)
    out = io.StringIO()
    rows = write_csv(out, ["config", "x [s]", "kind"], [Block(("tp=2, kv_dtype=fp8",), [x, names])])
    assert rows == 70_000
    back = list(csv.reader(io.StringIO(out.getvalue())))
    assert back[0] == ["config", "x [s]", "kind"] and len(back) == 70_001
    assert {r[0] for r in back[1:]} == {"tp=2, kv_dtype=fp8"}
    for i in (0, 3, 4, 65_536, 69_999):
        want = "" if math.isnan(x[i]) else x[i]
        assert (back[i + 1][1] if want == "" else float(back[i + 1][1])) == want  # shortest repr round-trips
    assert back[2][2] == "" and back[3][2] == 'odd "one", here' and back[-1][2] == "fp8"


def test_percent_in_a_label_is_text_not_a_format():
    out = io.StringIO()
    write_csv(out, ["config", "v"], [Block(("mem_util=95%",), [np.array([1.5])])])
    assert out.getvalue() == "config,v\nmem_util=95%,1.5\n"
    assert csv_quote("a,b") == '"a,b"'


def test_json_column_uses_null_for_nan():
    assert json_column(np.array([1.0, np.nan, 2.5])) == [1.0, None, 2.5]


def test_table_summarises_long_sweeps_unless_all():
    x = np.arange(1.0, 1001.0)
    out = io.StringIO()
    write_table(out, ["x", "y"], [Block((), [x, x * 2])])
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 + 10 + 1 + 10
    assert "980 more rows" in lines[11] and "--all" in lines[11]
    assert lines[1].split() == ["1", "2"] and lines[-1].split() == ["1,000", "2,000"]
    out = io.StringIO()
    write_table(out, ["x", "y"], [Block((), [x, x * 2])], show_all=True)
    assert len(out.getvalue().splitlines()) == 1001


def test_csv_dash_is_stdout_and_writes_no_file_named_dash(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "concur.cli", *ARGS, "--over", "concurrency=1..256:4", "--csv", "-"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = list(csv.reader(io.StringIO(out.stdout)))
    assert rows[0] == ["config", "concurrency [request]", "tokens_per_s_per_gpu [token/s]"] and len(rows) == 5
    assert [float(r[1]) for r in rows[1:]] == [1.0, 86.0, 171.0, 256.0]
    assert list(tmp_path.iterdir()) == []


def test_closed_pipe_ends_quietly_with_exit_0(tmp_path):
    cmd = [sys.executable, "-m", "concur.cli", *ARGS, "--over", "concurrency=1..256:300000", "--csv", "-"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_two_outputs_on_stdout_are_refused():
    res = CliRunner().invoke(cli, ARGS + ["--over", "concurrency=1,2", "--csv", "-", "--json"])
    assert res.exit_code != 0 and "both write stdout" in str(res.exception)


def test_json_has_null_for_points_without_an_answer():
    res = CliRunner().invoke(
        cli,
        [
            "sweep",
            "llm_memory",
            "--over",
            "tp=1,4",
            "--find",
            "users",
            "--json",
            "--set",
            "model=llama-3.1-70b",
            "--set",
            "gpu=h100-sxm-80gb",
            "--set",
            "context=8192 token",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["runs"][0]["columns"]["users"] == [None, 55.0]


def test_plot_dash_refuses_a_terminal(monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    from concur.cli.streams import binary_output
    from concur.errors import UsageError

    with pytest.raises(UsageError, match="terminal"), binary_output("-", ".png"):
        pass


# ---------------------------------------------------------------- plots

T70 = [
    "sweep",
    "llm_throughput",
    "--set",
    "model=llama-3.1-70b",
    "--set",
    "gpu=h100-sxm-80gb",
    "--set",
    "tp=4",
    "--set",
    "input_tokens=1024",
    "--set",
    "output_tokens=1024",
    "--over",
    "concurrency=1..512:6",
    "--log",
]


def test_curve_marks_the_kv_limit_from_the_solve(drawn, tmp_path):
    import concur

    res = CliRunner().invoke(cli, T70 + ["--find", "tokens_per_s_per_gpu", "--plot", str(tmp_path / "c.png")])
    assert res.exit_code == 0, res.output
    (ax,) = drawn
    given = {"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb", "tp": 4, "input_tokens": 1024, "output_tokens": 1024}
    sol = concur.solve("kv_tokens,kv_batch_limit", {**given, "concurrency": 1}, packs="llm_throughput")
    limit = math.floor(sol.value("kv_batch_limit"))
    # 451,008 tokens / 2,048 per request; the sweep's points are 1, 3.5, 12, 43, 148, 512
    assert limit == math.floor(sol.value("kv_tokens") / 2048) == 220
    at = concur.solve(
        "tokens_per_s_per_user,tokens_per_s_per_gpu", {**given, "concurrency": limit}, packs="llm_throughput"
    )
    assert ax["marks"] == [pytest.approx((at.value("tokens_per_s_per_user"), at.value("tokens_per_s_per_gpu")))]
    assert "scenario: KV pool full at c=220" in ax["legend"] and not any("Pareto" in t for t in ax["legend"])
    assert ax["xlabel"].endswith("[token/s/request]") and ax["ylabel"].endswith("[token/s]")
    assert "model=llama-3.1-70b, gpu=h100-sxm-80gb, tp=4" in ax["title"]


def test_plot_honours_find(drawn, tmp_path):
    res = CliRunner().invoke(cli, T70 + ["--find", "t_step,ttft", "--plot", str(tmp_path / "l.png")])
    assert res.exit_code == 0, res.output
    assert [ax["ylabel"] for ax in drawn] == [
        "t_step [ms]",
        "ttft [ms]",
    ]  # one panel per variable, each with its unit...
    assert drawn[-1]["xlabel"] == "concurrency [request]" and "t_step, ttft against concurrency" in drawn[0]["title"]
    assert not any(ax["marks"] for ax in drawn)  # ...and no throughput curve


def test_a_non_throughput_find_beside_a_throughput_gets_the_line_plot(drawn, tmp_path):
    res = CliRunner().invoke(cli, T70 + ["--find", "tokens_per_s,t_step", "--plot", str(tmp_path / "l.png")])
    assert res.exit_code == 0, res.output
    assert [ax["ylabel"] for ax in drawn] == ["tokens_per_s [token/s]", "t_step [ms]"]
