"""Stated assumptions: every default and list value an answer used unasked is printed under it, listed
under ``"assumed"`` in ``--json`` and on a workbook's Notes sheet; a missing input is asked for only
when it would answer, and an unpriced GPU says it has no list price."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest

from concur.cli import main

FLEET = [
    "--find", "replicas,cost_per_month", "--set", "model=llama-3.1-8b", "--set", "gpu=h100-sxm-80gb",
    "--set", "input_tokens=2000", "--set", "output_tokens=500", "--set", "arrival_rate=30",
]  # fmt: skip
STATED = {"tp", "weight_dtype", "kv_dtype", "engine", "utilization", "gpu_hour_price"}


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


@pytest.mark.parametrize("sla", [[], ["--set", "itl_slo=50 ms"], ["--set", "ttft_slo=1 s", "--set", "itl_slo=50 ms"]])
def test_a_fleet_answer_states_tp_dtypes_engine_utilization_and_price(capsys, sla):
    code, out, err = cli(capsys, "solve", *FLEET, *sla)
    assert code == 0, err
    notes = [line for line in out.splitlines() if line.startswith("note: assumed")]
    text = "\n".join(notes)
    assert "note: assumed tp = 1 (the pack's default; give tp to change it)" in notes
    assert "note: assumed utilization = 0.8 (the pack's default; give utilization to change it)" in notes
    assert "assumed weight_dtype = bf16 (bfloat16) for weight_bytes = 2 B/parameter" in text
    assert "assumed kv_dtype = bf16 (bfloat16) for kv_bytes = 2 B/token" in text
    assert "assumed engine = default (any engine (engine-agnostic fits per GPU family)) for efficiency_hopper" in text
    assert "assumed engine = vllm@0.11 (vLLM (V1 engine)) for max_num_seqs_large_gpu = 1024 request" in text
    assert "assumed gpu_hour_price = 6.88 usd/gpu/hour: aws's list price for gpu=h100-sxm-80gb (provider aws" in text
    assert "efficiency_ampere" not in text  # another GPU family's constant was never used


def test_json_lists_what_was_assumed_with_value_unit_and_source(capsys):
    code, out, err = cli(capsys, "solve", *FLEET, "--set", "itl_slo=50 ms", "--json")
    assert code == 0, err
    assumed = json.loads(out)["assumed"]
    assert set(assumed) >= STATED
    assert assumed["tp"]["value"] == 1 and assumed["tp"]["unit"] == ""
    assert assumed["tp"]["source"].startswith("the pack's default (formulas/llm_memory.yaml:")
    assert assumed["weight_dtype"]["value"] == "bf16" and assumed["engine"]["value"] == "default"
    assert assumed["engine:engine_limits"]["value"] == "vllm@0.11"  # the release engines.yaml names current
    price = assumed["gpu_hour_price"]
    assert price["value"] == 6.88 and price["unit"] == "usd/gpu/hour"
    assert "aws.amazon.com" in price["source"] and "p5.48xlarge" in price["source"]  # the provider
    assert all(set(a) == {"value", "unit", "source"} for a in assumed.values())


def test_what_is_given_is_not_assumed(capsys):
    given = ["--set", "tp=2", "--set", "weight_dtype=fp8", "--set", "kv_dtype=fp8", "--set", "engine=vllm"]
    given += ["--set", "utilization=0.7", "--set", "gpu_hour_price=3"]
    code, out, err = cli(capsys, "solve", *FLEET, *given, "--json")
    assert code == 0, err
    doc = json.loads(out)
    # engine=vllm names the engine, not its release: the one thing left to assume is which release
    assert list(doc["assumed"]) == ["engine"] and doc["assumed"]["engine"]["value"] == "vllm@0.11"
    assert [n for n in doc["notes"] if n.startswith("assumed")] == [
        "assumed engine = vllm@0.11, the newest release the engines catalog's vllm constants were fitted on "
        "(releases 0.6, 0.10, 0.11; give engine=vllm@VERSION to name one)"
    ]


def test_the_price_is_stated_once_the_gpu_is_chosen_but_not_when_typed(capsys):
    code, out, err = cli(capsys, "solve", *FLEET, "--set", "tp=1", "--json")
    assert code == 0, err
    assert "gpu_hour_price" in json.loads(out)["assumed"] and "tp" not in json.loads(out)["assumed"]


def test_a_price_asked_for_is_the_answer_not_an_assumption(capsys):
    """Asked for the price a budget allows, the answer is the price: the list price it replaced was
    still noted as assumed (llm_fleet printed 'assumed gpu_hour_price = 6.88' under 'gpu_hour_price 7.34')."""
    question = [arg if arg != "replicas,cost_per_month" else "gpu_hour_price,replicas" for arg in FLEET]
    code, out, err = cli(capsys, "solve", *question, "--set", "monthly_budget=40000", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "gpu_hour_price" not in doc["assumed"]
    assert not any(n.startswith("assumed gpu_hour_price") for n in doc["notes"])
    assert "utilization" in doc["assumed"]  # what the answer did read is still said


def test_an_unpriced_gpu_says_it_has_no_list_price(capsys):
    args = ["--set", "model=llama-3.1-8b", "--set", "gpu=mi300x", "--set", "input_tokens=2000"]
    args += ["--set", "output_tokens=500"]
    for question in (["--find", "cost_per_month", "--set", "arrival_rate=3"], ["--find", "arrival_rate"]):
        extra = ["--set", "monthly_budget=40000"] if "arrival_rate" in question[1] else []
        code, _, err = cli(capsys, "solve", *question, *args, *extra)
        assert code == 2, err
        assert "gpu mi300x has no list price" in err and "give gpu_hour_price" in err and "subscribers" not in err
        assert "subscribers" not in err and "step_time_per_seq" not in err


def test_the_workbook_notes_sheet_lists_the_assumptions(capsys, tmp_path: Path):
    book = tmp_path / "m.xlsx"
    code, _, err = cli(
        capsys, "export", "llm_memory", "--find", "users", "--set", "model=llama-3.1-70b",
        "--set", "gpu=h100-sxm-80gb", "--set", "context=8192 token", "--set", "tp=4", "-o", str(book),
    )  # fmt: skip
    assert code == 0, err
    wb = openpyxl.load_workbook(book)
    notes = [c.value for row in wb["Notes"].iter_rows() for c in row if isinstance(c.value, str)]
    assert any(n.startswith("assumed weight_dtype = bf16 (bfloat16) for weight_bytes") for n in notes)
    assert any(n.startswith("assumed kv_dtype = bf16") for n in notes)
    assert not any(n.startswith("assumed tp") for n in notes)  # tp was given
