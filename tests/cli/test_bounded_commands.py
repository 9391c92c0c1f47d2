"""Every command answers or refuses up front, naming the limit; a refusal is one short line.

Each input here used to give a traceback or run for minutes: ``plan`` with a zero SLA,
utilization, rate or output length (ZeroDivisionError), ``arrival_rate=1e308`` (OverflowError),
``1e30`` (471 s of replica searches) or ``--verify 1000000`` (every feasible row simulated);
``calibrate --from`` a 400- or 5,000-digit integer or deeply nested JSON (tracebacks) or a 5 MB
field (a 5 MB error line); ``export --search-up-to 1000`` (15 s of table cells); a per-point
sweep of 10^7 points; ``simulate --batches 100000000`` and an engine simulation of 10^8
closed-loop clients. Limits are counts, so the tests assert exit codes and messages, never
durations (each command runs under a generous subprocess timeout).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from concur.analysis.bench_import import MAX_RUNS
from concur.analysis.fleet_plan import MAX_CONFIGS
from concur.analysis.simulate import MAX_ARRIVALS, MAX_BATCHES, MAX_UNITS
from concur.analysis.verify import MAX_VERIFY
from concur.errors import MAX_HINT, MAX_MESSAGE, UsageError, clip
from concur.excel.live_search import MAX_CANDIDATES
from concur.lang import yamlsafe
from concur.lang.library import get_catalog
from concur.sweep.vector import MAX_SEARCH_POINTS

PLAN = ("plan", "--set", "model=llama-3.1-70b", "--set", "input_tokens=1000", "--set", "output_tokens=400")
CAL = ("--set", "model=llama-3.1-8b", "--set", "gpu=h100-sxm-80gb")
ENGINE = ("--model", "engine", *CAL, "--set", "engine=vllm", "--set", "input_tokens=100", "--set", "output_tokens=100")
RUN = {
    "completed": 10,
    "mean_tpot_ms": 20,
    "output_throughput": 500,
    "max_concurrency": 4,
    "total_input_tokens": 1000,
    "total_output_tokens": 1000,
    "backend": "vllm",
}


def concur(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "concur.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def refused(out: subprocess.CompletedProcess, code: int = 2) -> str:
    """The one error line of a refusal (exit ``code``), checked to be short and traceback-free."""
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert out.returncode == code and len(lines) == 1, (out.returncode, out.stderr[-2000:])
    assert len(lines[0]) <= 800, len(lines[0])
    return lines[0]


@pytest.mark.parametrize(
    "setting, name",
    [
        ("ttft_slo=0", "ttft_slo"),
        ("itl_slo=0", "itl_slo"),
        ("utilization=0", "utilization"),
        ("arrival_rate=0", "arrival_rate"),
        ("output_tokens=0", "output_tokens"),
    ],
)
def test_plan_refuses_zero_rates_slas_and_utilization(setting, name):
    args = PLAN if setting.startswith("arrival_rate") else (*PLAN, "--set", "arrival_rate=50")
    line = refused(concur(*args, "--set", setting))
    assert f"{name} must be a positive finite number for a plan" in line


def test_a_fleet_request_yields_at_least_its_first_token():
    """output_tokens 0 in a fleet question is one input error (exit 2), not a failed replica search."""
    args = ("solve", "llm_fleet", "--find", "replicas", "--scenario", "default", "--set", "output_tokens=0")
    line = refused(concur(*args))
    assert "'output_tokens >= [1 token/request]' does not hold" in line and "first token" in line


@pytest.mark.parametrize("rate", ["1e30", "1e308"])
def test_plan_refuses_a_rate_past_the_replica_bound(rate):
    narrow = ("--gpus", "h100-sxm-80gb", "--tp", "4", "--weight-dtypes", "bf16", "--kv-dtypes", "bf16")
    line = refused(concur(*PLAN, *narrow, "--set", f"arrival_rate={rate}"))
    assert "needs more than 1,000,000 replicas" in line and "arrival_rate" in line


def test_plan_refuses_a_grid_past_its_configuration_cap():
    """Every GPU as a prefill GPU, with every provider and speculation on and off, was 94,080
    configurations and 141 s of sizing; TP 1 to 1,024 was 172,032."""
    every_gpu = ",".join(get_catalog("gpus").entries)
    wide = ("--modes", "agg,disagg", "--prefill-gpus", every_gpu, "--provider", "all", "--spec", "off,on")
    line = refused(concur(*PLAN, "--set", "arrival_rate=5", *wide))
    assert f"configurations (6,720 x 14 prefill GPUs); a plan sizes at most {MAX_CONFIGS:,}" in line
    tps = ",".join(str(t) for t in range(1, 1025))
    assert "the plan's grid holds 172,032 configurations" in refused(
        concur(*PLAN, "--set", "arrival_rate=5", "--tp", tps)
    )


def test_plan_verify_is_bounded_and_top_is_a_count():
    """``--verify 1000000`` simulated every feasible row (384 of the default grid: minutes); it is
    refused before the plan. ``--top -5`` silently dropped the five last rows."""
    narrow = ("--gpus", "h100-sxm-80gb", "--tp", "1", "--set", "arrival_rate=5")
    line = refused(concur(*PLAN, *narrow, "--verify", "1000000"))
    assert f"--verify 1,000,000 asks for more simulated rows than a plan verifies ({MAX_VERIFY})" in line
    assert "'--top': -5 is not in the range x>=0" in refused(concur(*PLAN, *narrow, "--top", "-5"))


@pytest.mark.parametrize(
    "text, says",
    [
        (json.dumps(RUN).replace('"completed": 10', '"completed": ' + "9" * 400), "an integer of 400 digits"),
        (json.dumps(RUN).replace('"completed": 10', '"completed": ' + "9" * 5000), "an integer of 5,000 digits"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (json.dumps({**RUN, "completed": "x" * 5_000_000}), "(5,000,002 characters)"),
    ],
    ids=["400-digits", "5000-digits", "deep", "5MB-field"],
)
def test_calibrate_refuses_hostile_result_files_in_one_short_line(tmp_path, text, says):
    path = tmp_path / "run.json"
    path.write_text(text)
    line = refused(concur("calibrate", "--from", str(path), *CAL))
    assert says in line and str(path) in line


def test_calibrate_reads_at_most_max_runs(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps({**RUN, "max_concurrency": 1 + i % 64}) for i in range(MAX_RUNS + 1)))
    line = refused(concur("calibrate", "--from", str(path), *CAL))
    assert f"holds more than {MAX_RUNS:,} runs" in line


def test_export_search_up_to_is_bounded_by_rows(tmp_path):
    line = refused(
        concur(
            "export",
            "llm_fleet",
            "--find",
            "replicas",
            "--scenario",
            "default",
            "--search-up-to",
            "1000",
            "-o",
            str(tmp_path / "f.xlsx"),
        )
    )
    assert f"1,000 candidate rows for replicas; a table holds at most {MAX_CANDIDATES:,}" in line
    assert not (tmp_path / "f.xlsx").exists()


def test_a_per_point_sweep_is_bounded_by_points():
    args = ("--set", "model=llama-3.1-70b", "--set", "gpu=h100-sxm-80gb", "--set", "context=8192 token")
    line = refused(concur("sweep", "llm_memory", "--find", "tp", "--over", "users=1..10000000:10000000", *args))
    assert "10,000,000 points" in line and f"at most {MAX_SEARCH_POINTS:,} points" in line


def test_an_error_echoing_a_huge_value_stays_short():
    line = refused(concur("solve", "--find", "users", "--set", "model=" + "x" * 100_000))
    assert "(100,016 ch)" in line  # how much was cut says itself
    long = UsageError("m" * 10_000, hint="h" * 10_000)
    assert len(long.message) == MAX_MESSAGE and len(long.hint or "") == MAX_HINT
    assert clip("short", 10) == "short"
    escaped = refused(concur("solve", "--find", "users", "--set", "model=" + "\u202e" * 2000))
    assert "\\u202e" in escaped and "\u202e" not in escaped  # escaped, and still one short line


def test_check_parses_a_pure_parser_file_once(tmp_path, monkeypatch):
    """A file with U+2028 is read by the pure-Python parser (some 20,000 events a second); ``check``
    loads a pack that fails validation again to collect every problem: the events are replayed,
    never scanned again, and each load gets a tree of its own."""
    from ruamel.yaml import YAML

    scans = []
    real = YAML.parse
    monkeypatch.setattr(YAML, "parse", lambda self, text: scans.append(1) or real(self, text))
    text = 'pack: p\ndoc: "a\u2028b"\nitems:\n' + "".join(f"  - k{i}\n" for i in range(2000))
    assert not yamlsafe.uses_libyaml(text)
    first = yamlsafe.load_yaml("p.yaml", text=text)
    second = yamlsafe.load_yaml("p.yaml", text=text)
    assert first == second and first is not second and first["items"] is not second["items"]
    assert len(first["items"]) == 2000 and second.where("items").line == 3
    assert len(scans) == 1


@pytest.mark.parametrize(
    "args, says",
    [
        (
            ("--model", "mmc", "--rate", "1e9", "--service-time", "1e-9", "--duration", "1e9"),
            f"a simulation takes at most {MAX_ARRIVALS:,}",
        ),
        (
            ("--model", "mmc", "--rate", "1", "--service-time", "1", "--servers", "1000000000", "--duration", "10"),
            f"1,000,000,000 servers is more than a simulation holds ({MAX_UNITS:,})",
        ),
        (("--rate", "1e6", "--replicas", "1000", "--duration", "1e6"), "2,000,000,000,000 arrivals"),
        (("--rate", "1", "--batches", "2000"), f"2,000 batches is more than a simulation slices ({MAX_BATCHES:,})"),
        (
            (*ENGINE, "--concurrency", "5000", "--requests", "100", "--warmup-requests", "0", "--max-events", "1000"),
            "5,000 closed-loop clients cannot finish within max_events (1,000)",
        ),
    ],
    ids=["arrivals", "servers", "fleet", "batches", "engine-clients"],
)
def test_simulate_refuses_runs_over_its_counts(args, says):
    assert says in refused(concur("simulate", *args))
