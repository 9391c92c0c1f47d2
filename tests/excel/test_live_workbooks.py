"""Live branches and live searched integers, recalculated by LibreOffice against a fresh solve.

One soffice run (module fixture ``recalculated``) recalculates every workbook below after an
edit made the way a user makes it (a dropdown id or a number typed into an input cell); each
test then compares the sheet with ``solve_model`` on the edited givens -- what ``concur solve``
prints. Without soffice these tests skip, except under CI=true where they fail.

* ``llm_memory --find users`` exported for Llama-3.1-70B (H200, TP8, fp8 weights), the model
  switched to DeepSeek-V3 (MLA), gpt-oss-120b (sliding window, MoE) and Qwen3-235B-A22B (MoE);
  and exported for DeepSeek-V3, switched back to Llama (the GQA branch the solver never ran).
* ``queueing --find servers`` for 80 % within 20 s: the arrival rate doubled, the target raised,
  and a rate far beyond the candidate table (the check must say so, not show a wrong number).
* ``littles_law --find replicas`` with the step time depending on the batch (a loop torn at the
  integer ``replicas``): the arrival rate doubled.
* ``llm_memory --find tp`` for 100 users: another model picked in the dropdown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openpyxl")

from helpers import require_soffice

from concur.excel.from_solution import plan_from_solution
from concur.excel.writer import write_workbook
from concur.lang.model import build_model
from concur.solver.question import solve_model

pytestmark = pytest.mark.libreoffice

H200 = {
    "model": "llama-3.1-70b",
    "gpu": "h200-sxm-141gb",
    "tp": 8,
    "weight_dtype": "fp8",
    "kv_dtype": "bf16",
    "context": "8192 token",
    "overhead": "4 GiB",
    "mem_util": 0.9,
}
CALLS = {
    "arrival_rate": "0.05555555555555556 request/s",
    "service_time": "180 s",
    "target_time": "20 s",
    "service_level": 0.8,
}
LOOP = {
    "arrival_rate": "50 request/s",
    "ttft": "500 ms",
    "output_tokens": "400 token/request",
    "step_time_base": "20 ms",
    "step_time_per_seq": "0.5 ms*replica/request",
    "per_replica_concurrency": "64 request/replica",
    "utilization": 0.8,
}
TP = {
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm-80gb",
    "users": 100,
    "context": "8192 token",
    "overhead": "4 GiB",
    "mem_util": 0.9,
}

# name -> (pack, find, givens at export, the edit typed into the sheet, the same edit as a given)
CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "mem": ("llm_memory", "users", H200, {}, {}),
    "mem_mla": ("llm_memory", "users", H200, {"model": "deepseek-v3"}, {"model": "deepseek-v3"}),
    "mem_swa": ("llm_memory", "users", H200, {"model": "gpt-oss-120b"}, {"model": "gpt-oss-120b"}),
    "mem_moe": ("llm_memory", "users", H200, {"model": "qwen3-235b-a22b"}, {"model": "qwen3-235b-a22b"}),
    "mla_gqa": (
        "llm_memory",
        "users",
        {**H200, "model": "deepseek-v3"},
        {"model": "llama-3.1-70b"},
        {"model": "llama-3.1-70b"},
    ),
    "calls": ("queueing", "servers", CALLS, {}, {}),
    "calls_2x": (
        "queueing",
        "servers",
        CALLS,
        {"arrival_rate": 0.1111111111111111},
        {"arrival_rate": "0.1111111111111111 request/s"},
    ),
    "calls_95": ("queueing", "servers", CALLS, {"service_level_target": 0.95}, {"service_level": 0.95}),
    "loop": ("littles_law", "replicas", LOOP, {}, {}),
    "loop_2x": ("littles_law", "replicas", LOOP, {"arrival_rate": 100}, {"arrival_rate": "100 request/s"}),
    "tp": ("llm_memory", "tp", TP, {}, {}),
    "tp_qwen": ("llm_memory", "tp", TP, {"model": "qwen3-32b"}, {"model": "qwen3-32b"}),
}


@pytest.fixture(scope="module")
def recalculated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_soffice()
    from concur.excel.recalc import recalculate_many, set_inputs

    tmp = tmp_path_factory.mktemp("live")
    exported: dict[tuple[str, str, str], Path] = {}
    jobs: dict[str, Path] = {}
    for key, (pack, find, given, edit, _) in CASES.items():
        spec = (pack, find, repr(sorted(given.items())))
        if spec not in exported:
            sol = solve_model(build_model([pack]), (find,), given)
            exported[spec] = write_workbook(plan_from_solution(sol, key), tmp / f"export_{len(exported)}.xlsx")
        jobs[key] = set_inputs(exported[spec], edit, tmp / f"{key}.xlsx")
    jobs["calls_far"] = set_inputs(jobs["calls"], {"arrival_rate": 1.0}, tmp / "calls_far.xlsx")
    outs = recalculate_many(list(jobs.values()), tmp / "out")
    return dict(zip(jobs, outs))


def _fresh(key: str) -> Any:
    pack, find, given, _, as_given = CASES[key]
    return solve_model(build_model([pack]), (find,), {**given, **as_given})


@pytest.mark.parametrize("key", list(CASES))
def test_the_sheet_answers_what_a_fresh_solve_answers(key: str, recalculated: dict[str, Any]) -> None:
    from concur.excel.recalc import read_names, workbook_errors

    find = CASES[key][1]
    sol = _fresh(key)
    got = read_names(recalculated[key], [find])[find]
    assert got == sol.value(find), f"{key}: sheet {got!r}, concur solve {sol.value(find)!r}"
    assert workbook_errors(recalculated[key]) == []


def test_switching_the_model_follows_the_cli(recalculated: dict[str, Any]) -> None:
    """The numbers of the issue, from an H200 TP8 fp8-weights export of Llama-3.1-70B."""
    from concur.excel.recalc import read_names

    users = {key: read_names(recalculated[key], ["users"])["users"] for key in ("mem", "mem_mla", "mem_swa")}
    assert users == {"mem": 363, "mem_mla": 81, "mem_swa": 2428}
    mla = read_names(recalculated["mem_mla"], ["attention", "kv_lora_rank", "kv_per_token"])
    assert mla == {"attention": "mla", "kv_lora_rank": 512, "kv_per_token": 70272}
    swa = read_names(recalculated["mem_swa"], ["sliding_window", "effective_context"])
    assert swa == {"sliding_window": 128, "effective_context": 5192}


def test_staffing_follows_the_rate_and_the_target(recalculated: dict[str, Any]) -> None:
    from concur.excel.recalc import read_names

    servers = {key: read_names(recalculated[key], ["servers"])["servers"] for key in ("calls", "calls_2x", "calls_95")}
    assert servers == {"calls": 14, "calls_2x": 24, "calls_95": 16}


def test_an_answer_beyond_the_candidates_says_out_of_range(recalculated: dict[str, Any]) -> None:
    import openpyxl

    from concur.excel.recalc import read_names

    assert read_names(recalculated["calls_far"], ["servers"]) == {"servers": "#N/A"}  # not a wrong number
    wb = openpyxl.load_workbook(recalculated["calls_far"], data_only=True)
    assert wb["Search servers"]["B3"].value == "out of range"
    assert wb["Model"]["H3"].value == "out of range" and wb["Inputs"]["E5"].value == "out of range"
    ok = openpyxl.load_workbook(recalculated["calls"], data_only=True)
    assert ok["Search servers"]["B3"].value == "ok" and ok["Inputs"]["E5"].value == "in range"
    rules = openpyxl.load_workbook(recalculated["calls"])["Search servers"].conditional_formatting
    assert [r.operator for cf in rules for r in cf.rules] == ["notEqual"]  # red unless "ok"
