"""The CLI as a program talks to programs: JSON on every command (errors too), '-' for stdin/stdout,
quiet exits on closed pipes, progress only where a person watches (a terminal on stderr)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "concur.cli", *args], capture_output=True, text=True, timeout=120, input=stdin, cwd=cwd
    )


def test_version_short_and_long():
    for flag in ("-V", "--version"):
        out = run(flag)
        assert out.returncode == 0 and out.stdout.startswith("concur, version ")


def test_list_json():
    out = run("list", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    packs = {p["name"]: p for p in doc["packs"]}
    assert packs["llm_memory"]["variables"] > 10 and packs["llm_memory"]["equations"] > 5
    assert {c["name"] for c in doc["catalogs"]} >= {"gpus", "models", "dtypes"}
    assert "h100-sxm-80gb" in next(c for c in doc["catalogs"] if c["name"] == "gpus")["entries"]


def test_show_json():
    out = run("show", "llm_memory", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["pack"] == "llm_memory"
    assert doc["variables"]["kv_per_token"]["unit"] == "B/token"
    assert doc["variables"]["attention"]["choices"] == ["gqa", "mla"] and doc["variables"]["attention"]["unit"] is None
    assert doc["variables"]["tp"]["integer"] is True
    assert any(
        eq["text"].startswith("users = dp_attention * floor((kv_tokens - prefix_held)") for eq in doc["equations"]
    )
    assert doc["presets"]["gpu"]["catalog"] == "gpus"


@pytest.mark.parametrize(
    "args, code, kind",
    [
        (["solve", "--find", "users", "--set", "contxt=8192", "--json"], 2, "UnknownNameError"),
        (["show", "no_such_pack", "--json"], 2, "UnknownNameError"),
        (["list", "--json", "--bogus"], 2, "NoSuchOption"),
        (
            ["sweep", "llm_memory", "--over", "tp=1,2", "--find", "users", "--set", "model=nope", "--json"],
            2,
            "UnknownNameError",
        ),
        (["diagnose", "--json"], 2, "UsageError"),
        (["remedies", "--json", "--set", "model=llama-3.1-70b", "--mem-util", "2"], 2, "UsageError"),
        (["simulate", "--rate", "-1", "--json"], 2, "UsageError"),
        (["export", "llm_memory", "--find", "users", "-o", "x.txt", "--json"], 2, "UsageError"),
        (
            [
                "solve",
                "--find",
                "users",
                "--set",
                "model=llama-3.1-405b",
                "--set",
                "gpu=l40s",
                "--set",
                "tp=1",
                "--set",
                "context=8192 token",
                "--json",
            ],
            3,
            "InfeasibleError",
        ),
    ],
)
def test_errors_under_json_are_one_json_object_on_stdout(args, code, kind, tmp_path):
    out = run(*args, cwd=tmp_path)
    assert out.returncode == code, (out.stdout, out.stderr)
    error = json.loads(out.stdout)["error"]
    assert error["code"] == code and error["type"] == kind and error["message"]
    assert set(error) == {"code", "type", "message", "location", "variable", "hint"}
    assert "Traceback" not in out.stderr


def test_json_error_carries_location_and_variable(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("given:\n  context: [1, 2]\n")
    out = run("solve", "--scenario", str(scenario), "--find", "users", "--json")
    error = json.loads(out.stdout)["error"]
    assert out.returncode == 2 and "'context' must be a number" in error["message"]
    out = run("solve", "--find", "users", "--set", "contxt=8192", "--json")
    error = json.loads(out.stdout)["error"]
    assert error["location"] is None and "did you mean context" in error["hint"]


def test_scenario_from_stdin():
    text = (
        "packs: [llm_memory]\nfind: [users]\ngiven: {model: llama-3.1-70b, gpu: h100-sxm-80gb, tp: 8,\n"
        "  context: 8192 token}\n"
    )
    out = run("solve", "--scenario", "-", "--json", stdin=text)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["results"]["users"]["value"] == 162
    bad = run("solve", "--scenario", "-", stdin="given: [1\n")
    assert bad.returncode == 2 and "<stdin>:" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_export_to_stdout_and_json_report(tmp_path):
    args = [
        "export",
        "llm_memory",
        "--find",
        "users",
        "--set",
        "model=llama-3.1-70b",
        "--set",
        "gpu=h100-sxm-80gb",
        "--set",
        "tp=4",
        "--set",
        "context=8192 token",
    ]
    out = subprocess.run(
        [sys.executable, "-m", "concur.cli", *args, "-o", "-"], capture_output=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout[:2] == b"PK" and list(tmp_path.iterdir()) == []  # an .xlsx is a zip; no file named '-'
    out = run(*args, "-o", str(tmp_path / "w.xlsx"), "--json")
    assert json.loads(out.stdout) == {
        "wrote": str(tmp_path / "w.xlsx"),
        "title": "llm_memory",
        "packs": ["llm_memory"],
        "find": ["users"],
    }


def test_simulate_plot_to_stdout(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "concur.cli", "simulate", "--rate", "5", "--duration", "50", "--plot", "-"],
        capture_output=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout[:8] == b"\x89PNG\r\n\x1a\n" and list(tmp_path.iterdir()) == []


def test_closed_pipe_is_quiet_for_a_table():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "concur.cli",
            "sweep",
            "littles_law",
            "--over",
            "arrival_rate=1..50:400000",
            "--find",
            "in_flight",
            "--set",
            "residence_time=3",
            "--all",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == ""


def _with_terminal_stderr(*args: str) -> tuple[str, str, int]:
    """Run concur with stderr on a pseudo-terminal and stdout on a pipe; (stdout, stderr, exit code)."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "concur.cli", *args], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.stdout is not None
    stdout = proc.stdout.read().decode()
    code = proc.wait(timeout=120)
    os.close(master)
    return stdout, b"".join(chunks).decode(errors="replace"), code


SIM = ["simulate", "--rate", "30", "--replicas", "10", "--duration", "4000", "--seed", "1"]


def test_progress_on_a_terminal_stderr_and_not_in_stdout():
    stdout, stderr, code = _with_terminal_stderr(*SIM)
    assert code == 0
    assert "simulating" in stderr  # the bar, on the terminal
    assert stdout.split()[0] == "simulated" and "\x1b" not in stdout  # piped stdout stays clean


def test_no_progress_when_stderr_is_not_a_terminal():
    out = run(*SIM)
    assert out.returncode == 0 and out.stderr == ""


def test_per_point_sweep_shows_progress_on_a_terminal():
    # concurrency from t_step inverts through max(): the sweep falls back to one solve per point
    stdout, stderr, code = _with_terminal_stderr(
        "sweep",
        "llm_throughput",
        "--over",
        "t_step=5..20:40",
        "--find",
        "concurrency",
        "--set",
        "model=llama-3.1-8b",
        "--set",
        "gpu=h100-sxm-80gb",
        "--set",
        "input_tokens=1024",
        "--set",
        "output_tokens=2048",
        "--set",
        "efficiency=1",
        "--set",
        "t_fixed=0",
    )
    assert code == 0, stderr
    assert "solving per point" in stderr and "concurrency [request]" in stdout


def test_no_command_imports_the_cli_package_init():
    """The group imports commands by name only; commands import cli/ modules, never cli/__init__ names."""
    import ast

    for path in sorted((ROOT / "engine" / "concur" / "cli").rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue  # the package itself and `python -m concur.cli`, which runs its main
        tree = ast.parse(path.read_text())
        package = ".".join(path.parent.relative_to(ROOT / "engine").parts)  # concur.cli, concur.cli.web, ...
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
                assert target != "concur.cli", f"{path.name}:{node.lineno} imports from concur.cli's __init__"
            if isinstance(node, ast.ImportFrom) and not node.level:
                assert node.module != "concur.cli", f"{path.name}:{node.lineno} imports from concur.cli"
