"""The issue "No silent wrong answers": units are exact, and each of its commands ends with an
answer or a one-line error.

Every command runs as a subprocess with ``timeout=60``: a hang guard only (the solve budget counts
steps, not seconds, so a loaded 2-core CI machine gets the same answers); no test measures time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import concur
from concur.cli.givens import load_scenario, parse_sets
from concur.errors import UsageError
from concur.lang.model import build_model
from concur.solver.givens import resolve_givens

LITTLE = {
    "arrival_rate": 50,
    "ttft": 500,
    "output_tokens": 400,
    "t_step": 30,
    "per_replica_concurrency": 64,
    "utilization": 0.8,
}
GPT_OSS = ["--set", "model=gpt-oss-120b", "--set", "gpu=h100-sxm-80gb", "--set", "tp=4", "--set", "context=16384 token"]


def concur_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "concur.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def one_line_error(out: subprocess.CompletedProcess, code: int) -> str:
    """The refusal: exit ``code``, one line on stderr, no traceback anywhere."""
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stdout + out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def answer(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return json.loads(out.stdout)


def sets(given: dict) -> list[str]:
    return [w for k, v in given.items() for w in ("--set", f"{k}={v}")]


def base(pack: str, name: str, raw) -> float:
    return resolve_givens(build_model([pack]), {name: raw}).values[name]


# ---------------------------------------------------------------- units are exact


@pytest.mark.parametrize("raw", ["8192 token**2", "8192 token*user", "8192 user", "8192 s"])
def test_a_written_count_must_have_the_right_exponent(raw):
    with pytest.raises(UsageError, match="token/user") as err:
        base("llm_memory", "context", raw)
    assert err.value.exit_code == 2
    assert raw in str(err.value)


@pytest.mark.parametrize("raw", ["8192 token**2", "8192 token*user"])
def test_a_wrong_exponent_exits_2_on_the_command_line(raw):
    out = concur_cli("solve", "llm_memory", "--find", "users", *GPT_OSS[:-2], "--set", f"context={raw}")
    line = one_line_error(out, 2)
    assert raw in line and "token/user" in line


@pytest.mark.parametrize(
    "raw", ["8192 token", "8192 token/user", "8192", 8192, "8Ki", "8Ki token", "8192 1/user", "8192 per user"]
)
def test_an_omitted_count_is_implied(raw):
    assert base("llm_memory", "context", raw) == 8192


def test_rates_per_hour_and_per_minute_in_any_spelling():
    per_hour = [
        base("littles_law", "arrival_rate", raw)
        for raw in ("300/hour", "300 per hour", "300 request/hour", "5/min", "5 per minute")
    ]
    assert per_hour == [pytest.approx(300 / 3600)] * 5
    per_min = [base("littles_law", "arrival_rate", raw) for raw in ("1000/min", "1000 per min", "1000 request/min")]
    assert per_min == [pytest.approx(1000 / 60)] * 3
    assert base("littles_law", "arrival_rate", "1000/min") == base("littles_law", "arrival_rate", "60000/hour")


@pytest.mark.parametrize(
    "name, raw, unit",
    [
        ("t_step", "4 GiB", "ms"),
        ("residence_time", "4 GiB", "s"),
        ("t_step", "30 token", "ms"),
        ("arrival_rate", "4 GiB", "request/s"),
        ("arrival_rate", "300 hour", "request/s"),
    ],
)
def test_another_dimension_is_refused_naming_the_unit(name, raw, unit):
    with pytest.raises(UsageError, match=f"give it in {unit}"):
        base("littles_law", name, raw)


def test_a_time_given_in_gib_exits_2():
    line = one_line_error(
        concur_cli(
            "solve", "littles_law", "--find", "in_flight", "--set", "arrival_rate=1", "--set", "residence_time=4 GiB"
        ),
        2,
    )
    assert "4 GiB" in line and "give it in s" in line


def test_the_bare_number_is_the_display_unit_not_the_base_unit():
    """The anchor every path of test_one_meaning is compared against: t_step=30 is 30 ms."""
    assert base("littles_law", "t_step", 30) == pytest.approx(0.03)
    assert (
        base("littles_law", "t_step", "30 ms")
        == base("littles_law", "t_step", "0.03 s")
        == base("littles_law", "t_step", "30")
        == pytest.approx(0.03)
    )
    assert base("llm_memory", "params", 70) == pytest.approx(70e9)


def test_decimal_k_is_8000_with_a_note_and_ki_is_8192():
    m = build_model(["llm_memory"])
    k = resolve_givens(m, {"context": "8k"})
    assert k.values["context"] == 8000
    assert len(k.notes) == 1 and "8,000" in k.notes[0] and "8Ki = 8,192" in k.notes[0]
    ki = resolve_givens(m, {"context": "8Ki"})
    assert ki.values["context"] == 8192 and ki.notes == []
    out = concur_cli("solve", "llm_memory", "--find", "users", *GPT_OSS[:-2], "--set", "context=8k")
    assert out.returncode == 0, out.stderr
    assert "8Ki = 8,192" in out.stdout + out.stderr


# ---------------------------------------------------------------- the commands


def test_littles_law_bare_numbers_give_13_replicas():
    out = concur_cli("solve", "littles_law", "--find", "replicas", *sets(LITTLE), "--json")
    assert answer(out)["results"]["replicas"]["value"] == 13


def test_littles_law_the_same_numbers_through_over_give_13():
    given = {k: v for k, v in LITTLE.items() if k != "t_step"}
    out = concur_cli("sweep", "littles_law", "--find", "replicas", "--over", "t_step=30..30:1", *sets(given), "--json")
    columns = answer(out)["runs"][0]["columns"]
    assert columns["t_step"] == [30.0] and columns["replicas"] == [13.0]


def test_littles_law_the_same_numbers_through_a_scenario_give_13(tmp_path):
    scenario = tmp_path / "fleet.yaml"
    scenario.write_text(
        "packs: [littles_law]\nfind: [replicas]\ngiven:\n" + "".join(f"  {k}: {v}\n" for k, v in LITTLE.items())
    )
    assert load_scenario(str(scenario))[0] == LITTLE
    out = concur_cli("solve", "--scenario", str(scenario), "--json")
    assert answer(out)["results"]["replicas"]["value"] == 13


@pytest.mark.parametrize("key", ["Given", "givn", "given_values"])
def test_a_scenario_key_that_is_not_given_packs_or_find_is_refused(tmp_path, key):
    """A misspelt ``given:`` was ignored: its values never reached the solve, so ``Given: {tp: 2}`` with
    the rest on --set answered for llm_memory's default tp=1 (exit 0), and here the error blamed
    t_step's missing step times instead of the file."""
    scenario = tmp_path / "typo.yaml"
    scenario.write_text(f"packs: [littles_law]\n{key}:\n  t_step: 1000\n")
    given = {k: v for k, v in LITTLE.items() if k != "t_step"}
    line = one_line_error(concur_cli("solve", "--scenario", str(scenario), "--find", "replicas", *sets(given)), 2)
    assert f"{scenario}:2:1: unknown key(s) ['{key}'] in a scenario; allowed: find, given, packs" in line


@pytest.mark.parametrize("value, shown", [(".nan", "nan"), (".inf", "inf"), ("1e400", "inf")])
def test_a_scenario_value_that_is_not_finite_is_refused_where_it_is_written(tmp_path, value, shown):
    """The refusal named the variable but not the file or line: 'nan is not a finite number (variable
    't_step')', as if it had come from --set."""
    scenario = tmp_path / "nan.yaml"
    scenario.write_text(f"packs: [littles_law]\ngiven:\n  arrival_rate: 50\n  t_step: {value}\n")
    line = one_line_error(concur_cli("solve", "--scenario", str(scenario), "--find", "replicas"), 2)
    assert line.startswith(f"error: {scenario}:4:3: t_step: {shown} is not a finite number"), line


def test_littles_law_the_same_numbers_through_the_api_give_13():
    assert concur.solve(find="replicas", given=LITTLE, packs="littles_law").value("replicas") == 13
    assert (
        concur.solve(
            find="replicas", given=parse_sets(tuple(f"{k}={v}" for k, v in LITTLE.items())), packs="littles_law"
        ).value("replicas")
        == 13
    )


def _pack(folder: Path, name: str, variables: str, equations: list[str], extra: str = "") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        f"pack: {name}\nvariables:\n{variables}equations:\n" + "".join(f"  - {eq}\n" for eq in equations) + extra
    )
    return path


def test_adding_gib_to_seconds_fails_the_check(tmp_path):
    pack = _pack(tmp_path, "mixed", "  a: {unit: GiB}\n  b: {unit: s}\n  c: {unit: GiB}\n", ["c = a + b"])
    line = one_line_error(concur_cli("solve", str(pack), "--find", "c", "--set", "a=1", "--set", "b=2"), 1)
    assert "unit mismatch" in line and "c = a + b" in line


def test_a_rate_constant_that_leaves_the_wrong_unit_fails_the_check(tmp_path):
    pack = _pack(tmp_path, "rate", "  a: {unit: GiB}\n  c: {unit: s}\n", ["c = a * [1 GiB/s]"])
    line = one_line_error(concur_cli("solve", str(pack), "--find", "c", "--set", "a=1"), 1)
    assert "unit mismatch" in line


def test_c_equals_c_plus_a_has_no_solution(tmp_path):
    pack = _pack(tmp_path, "selfref", "  a: {unit: s}\n  c: {unit: s}\n", ["c = c + a"])
    line = one_line_error(concur_cli("solve", str(pack), "--find", "c", "--set", "a=1"), 3)
    assert "no value of c satisfies" in line


# The example expecting 21 for b = 2 a with a = 10 s is pinned by
# tests/solver/test_pack_examples.py::test_a_wrong_example_fails_concur_check.


def test_remedies_baseline_is_the_solve_answer():
    remedies = answer(concur_cli("remedies", *GPT_OSS, "--json"))["baseline"]["users"]
    solved = answer(concur_cli("solve", "llm_memory", "--find", "users", *GPT_OSS, "--json"))
    assert remedies == solved["results"]["users"]["value"] == 80


def test_queueing_mean_wait_from_a_service_level_target():
    data = answer(
        concur_cli(
            "solve",
            "queueing",
            "--find",
            "mean_wait",
            "--set",
            "arrival_rate=0.05555555555555556 request/s",
            "--set",
            "service_time=180 s",
            "--set",
            "target_time=20 s",
            "--set",
            "service_level=0.8",
            "--json",
        )
    )
    assert data["results"]["mean_wait"] == {"value": pytest.approx(7.835937, rel=1e-6), "unit": "s"}
    servers = {t["variable"]: t["value"] for t in data["trace"]}["servers"]
    assert servers == 14  # the smallest staff with service_level >= 0.8 (0.888 at 14)


def test_queueing_load_from_queue_length_and_blocking():
    """20/hour, Lq = 1/12 and Erlang B 2/17 are M/M/2 at load 2/3 (B(2, 2/3) = 2/17, Lq = 1/12)."""
    data = answer(
        concur_cli(
            "solve",
            "queueing",
            "--find",
            "load",
            "--set",
            "arrival_rate=20 request/hour",
            "--set",
            "mean_in_queue=0.08333333333333337",
            "--set",
            "blocking=0.11764705882352944",
            "--json",
        )
    )
    assert data["results"]["load"] == {"value": pytest.approx(2 / 3, rel=1e-6), "unit": "erlang"}


def test_worker_queue_queue_delay_from_tolerated_delay():
    """bound = floor(tolerated_delay x consumers / service_time) = 80 with tolerated_delay = 1 ms puts
    consumers / service_time in [80, 81) per ms, so queue_delay = 80 x service_time / consumers is in
    (80/81, 1] ms: the givens fix queue_delay only to that interval, and the answer must lie in it."""
    data = answer(
        concur_cli(
            "solve",
            "worker_queue",
            "--find",
            "queue_delay",
            "--set",
            "tolerated_delay=1",
            "--set",
            "bound=80",
            "--set",
            "throughput=80",
            "--json",
        )
    )
    got = data["results"]["queue_delay"]
    assert got["unit"] == "ms" and 80 / 81 < got["value"] <= 1 + 1e-12


def test_worker_queue_tolerated_delay_from_drain_time():
    """drain_time = 84 service_time / 4 = 1.05 s gives service_time = 50 ms; bound 80 at 4 consumers
    needs tolerated_delay in [1000, 1012.5) ms, and the smallest is 1,000 ms."""
    data = answer(
        concur_cli(
            "solve",
            "worker_queue",
            "--find",
            "tolerated_delay",
            "--set",
            "bound=80",
            "--set",
            "consumers=4",
            "--set",
            "drain_time=1.05",
            "--json",
        )
    )
    assert data["results"]["tolerated_delay"] == {"value": pytest.approx(1000, rel=1e-9), "unit": "ms"}


def test_queueing_load_from_min_servers_is_in_its_interval():
    """min_servers = floor(load) + 1 = 4 puts load in [3, 4). floor snaps its argument to 12
    significant digits (concur.lang.functions), so the search may stop a few 1e-12 below 3."""
    data = answer(
        concur_cli(
            "solve",
            "queueing",
            "--find",
            "load",
            "--set",
            "servers=10",
            "--set",
            "p_wait=0.0179",
            "--set",
            "min_servers=4",
            "--json",
        )
    )
    load = data["results"]["load"]["value"]
    assert 3 - 1e-9 <= load < 4


def test_an_empty_find_is_refused():
    one_line_error(concur_cli("solve", "--find", ""), 2)
    with pytest.raises(UsageError):
        concur.solve(find="", given={})


def test_a_loop_that_leaves_a_variable_free_names_it(tmp_path):
    pack = _pack(tmp_path, "loop", "  a: {unit: s}\n  b: {unit: s}\n  c: {unit: s}\n", ["a = b + c", "b = a - c"])
    line = one_line_error(concur_cli("solve", str(pack), "--find", "a", "--set", "c=1"), 2)
    assert "b" in line.split("free", 1)[1] and "give one of b" in line


def test_worker_queue_consumers_state_the_assumed_utilization():
    data = answer(
        concur_cli(
            "solve",
            "worker_queue",
            "--find",
            "consumers",
            "--set",
            "throughput=200/s",
            "--set",
            "service_time=120 ms",
            "--json",
        )
    )
    assert data["results"]["consumers"]["value"] == 30  # 200/s x 0.12 s / 0.8 = 30
    assert any("utilization = 0.8" in note for note in data["notes"])
    assert {t["variable"]: t["method"] for t in data["trace"]}["utilization"] == "default"


# ---------------------------------------------------------------- found here: a decimal comma


@pytest.mark.parametrize("raw", ["0,5", "0,5 GiB", "1,5", "12,34", "1,0000", "1,000,00", "1,5k"])
def test_a_decimal_comma_is_refused_not_read_as_digits(raw):
    """Regression: ``--set overhead=0,5`` was 5 GiB (the comma dropped) and ``1,5`` was 15."""
    with pytest.raises(UsageError, match="decimal point"):
        base("llm_memory", "overhead", raw)


@pytest.mark.parametrize(
    "raw, value", [("1,000", 1000), ("1,000,000", 1e6), ("1,000.5", 1000.5), ("1_000", 1000), ("1,000 GiB", 1000)]
)
def test_thousands_grouping_still_reads(raw, value):
    assert base("llm_memory", "overhead", raw) == pytest.approx(value * 2**33)


def test_a_decimal_comma_exits_2_on_the_command_line():
    line = one_line_error(concur_cli("solve", "llm_memory", "--find", "users", *GPT_OSS, "--set", "overhead=0,5"), 2)
    assert "0,5" in line and "decimal point" in line
