"""The CLI contract: outputs, JSON shape, exit codes, one-line errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

T1 = [
    "--set",
    "model=llama-3.1-70b",
    "--set",
    "gpu=h100-sxm-80gb",
    "--set",
    "tp=4",
    "--set",
    "kv_dtype=bf16",
    "--set",
    "weight_dtype=bf16",
    "--set",
    "context=8192 token",
    "--set",
    "overhead=4 GiB",
    "--set",
    "mem_util=0.9",
]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concur.cli", *args], capture_output=True, text=True, timeout=120)


def _users(*args: str) -> int:
    out = run("solve", "--find", "users", *args, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["results"]["users"]["unit"] == "user"
    return data["results"]["users"]["value"]


@pytest.mark.parametrize(
    "override, users", [([], 55), (["--set", "kv_dtype=fp8"], 110), (["--set", "tp=8"], 162), (["--set", "tp=16"], 188)]
)
def test_issue_commands(override, users):
    assert _users(*T1, *override) == users


def test_default_scenario():
    out = run("solve", "--find", "users")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:3] == ["users", "55", "user"]


def test_backwards_tp():
    args = [a for a in T1 if a != "tp=4"]
    args = [a for i, a in enumerate(args) if not (a == "--set" and i + 1 < len(args) and args[i + 1] == "--set")]
    out = run("solve", "--find", "tp", *args, "--set", "users=100", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["results"]["tp"]["value"] == 8


def test_architecture_only_questions():
    out = run(
        "solve",
        "llm_memory",
        "--find",
        "kv_per_token",
        "--set",
        "layers=80",
        "--set",
        "kv_heads=8",
        "--set",
        "head_dim=128",
        "--set",
        "tp=4",
        "--set",
        "kv_dtype=bf16",
        "--json",
    )
    assert json.loads(out.stdout)["results"]["kv_per_token"]["value"] == 81920
    out = run(
        "solve",
        "llm_memory",
        "--find",
        "kv_blocks",
        "--set",
        "kv_pool=31.83 GiB",
        "--set",
        "layers=80",
        "--set",
        "kv_heads=8",
        "--set",
        "head_dim=128",
        "--set",
        "tp=4",
        "--set",
        "kv_dtype=bf16",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["results"]["kv_blocks"]["value"] == 26075


def test_does_not_fit_exit_code():
    out = run("solve", "--find", "users", *T1, "--set", "model=llama-3.1-405b", "--set", "gpu=l40s")
    assert out.returncode == 3
    assert "does not fit" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--set", "contxt=8192"], "unknown variable 'contxt'"),
        (["--set", "context=8192 furlongz"], "unknown unit"),
        (["--set", "context=lots"], "not a number"),
        (["--set", "context=8192 GiB"], "does not fit context"),
        (["--set", "gpu=h100"], "unknown gpu"),
        (["--set", "tp"], "NAME=VALUE"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    out = run("solve", "--find", "users", *T1, *args)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert needle in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_explain_prints_derivation():
    out = run("solve", "--find", "users", *T1, "--explain")
    assert "derivation" in out.stdout and "kv_pool" in out.stdout


def test_list_and_show():
    assert "llm_memory" in run("list").stdout
    shown = run("show", "llm_memory").stdout
    assert (
        "kv_per_token" in shown
        and "users = dp_attention * floor((kv_tokens - prefix_held) / (effective_context - prefix_held / [user]))"
        in shown
    )


def test_default_replicas_scenario():
    out = run("solve", "--find", "replicas", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    # the fleet pack: Llama-3.1-70B on H100 TP4, 50 request/s of 1,000 in / 400 out; no step time by hand
    assert data["results"]["replicas"]["value"] == 7  # sized on the served step: prompts share every step
    assert data["given"]["model"]["value"] == "llama-3.1-70b" and data["given"]["gpu"]["value"] == "h100-sxm-80gb"
    assert not {"t_step", "step_time_base", "step_time_per_seq", "residence_time"} & set(data["given"])
    assert any("utilization = 0.8" in note for note in data["notes"])


def test_scenario_file(tmp_path):
    scenario = tmp_path / "plan.yaml"
    scenario.write_text(
        "packs: [llm_memory]\nfind: [users]\ngiven:\n  model: llama-3.1-70b\n  gpu: h100-sxm-80gb\n"
        "  tp: 8\n  context: 8192 token\n"
    )
    out = run("solve", "--scenario", str(scenario), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["results"]["users"]["value"] == 162
    # --set overrides the file
    out = run("solve", "--scenario", str(scenario), "--set", "tp=16", "--json")
    assert json.loads(out.stdout)["results"]["users"]["value"] == 188


def test_bad_scenario_file_is_a_one_line_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("given: [1, 2\n")
    out = run("solve", "--scenario", str(bad))
    assert out.returncode in (1, 2) and "Traceback" not in out.stderr and str(bad) in out.stderr


def test_default_scenario_with_overrides():
    out = run("solve", "--find", "replicas", "--scenario", "default", "--set", "arrival_rate=100", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["results"]["replicas"]["value"] == 14  # twice the default traffic
    bare = run("solve", "--find", "replicas", "--set", "arrival_rate=100")
    assert bare.returncode == 2 and "--scenario default" in bare.stderr


def test_explain_states_each_fitted_constant_and_its_cross_validated_error():
    """--explain names the fit behind every engine constant it used and its leave-one-source-out error."""
    import re as _re

    from concur.lang.library import get_catalog

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "concur.cli",
            "solve",
            "llm_throughput",
            "--find",
            "t_step",
            "--set",
            "model=llama-3.1-8b",
            "--set",
            "gpu=l40s",
            "--set",
            "input_tokens=1024",
            "--set",
            "output_tokens=1024",
            "--set",
            "concurrency=64",
            "--set",
            "engine=sglang",
            "--explain",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.strip().startswith("efficiency_ada "))
    source = " ".join(get_catalog("engines").entries["sglang"].values["efficiency_ada"][1].split())
    cv = _re.search(r"leave-one-source-out ([\d.]+%)", source)
    assert cv is not None and f"leave-one-source-out error {cv.group(1)}" in line
    assert "sglang@ada" in line and "preset engine=sglang" in line
    gpu_line = next(x for x in out.stdout.splitlines() if x.strip().startswith("hbm_bandwidth "))
    assert "leave-one-source-out" not in gpu_line  # a spec cited to a datasheet is not a fit
