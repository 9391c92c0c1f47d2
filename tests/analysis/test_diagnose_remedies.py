"""`concur diagnose` classifications on constructed cases; `concur remedies` ranking and numbers."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from concur.analysis.diagnose import diagnose
from concur.analysis.remedies import remedies
from concur.cli import cli
from concur.errors import ContradictionError, UnderdeterminedError, UsageError

L70 = {
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm-80gb",
    "tp": 4,
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
    "input_tokens": 1024,
    "output_tokens": 1024,
}
L8 = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "input_tokens": 128, "output_tokens": 128}


def test_bandwidth_bound():
    d = diagnose({**L70, "concurrency": 64}, measured_tokens_per_s=1500)
    assert d.binds == "bandwidth" and d.signature == ""
    assert d.kv_limit == 220  # floor(451,008 / 2,048): whole requests of 1,024 in + 1,024 out
    assert d.ratio_to_bound == pytest.approx(1500 / d.bound_tokens_per_s)
    assert 0.25 < d.ratio_to_bound < 0.35


def test_kv_full_with_idle_compute():
    d = diagnose({**L70, "concurrency": 290}, measured_tokens_per_s=5000)
    assert d.binds == "KV capacity" and d.signature == "KV pool full with idle compute"
    assert "remedies" in d.advice


def test_compute_bound_and_fixed_overhead():
    d = diagnose({**L8, "concurrency": 1024}, measured_itl_ms=200)
    assert d.binds == "compute" and d.measured_tokens_per_s == pytest.approx(5120)
    d = diagnose({**L8, "concurrency": 1, "t_fixed": 20}, measured_itl_ms=30)
    assert d.binds == "fixed overhead"


def test_kv_full_but_compute_busy_is_not_the_signature():
    # a short context holds many sequences; at the KV limit compute is already comparable to memory
    d = diagnose({**L8, "concurrency": 2200}, measured_tokens_per_s=10000)
    assert d.binds == "KV capacity"
    assert d.signature == ""


def test_diagnose_errors():
    with pytest.raises(UsageError, match="exactly one"):
        diagnose({**L70, "concurrency": 8})
    with pytest.raises(UnderdeterminedError, match="offered load"):
        diagnose(L70, measured_tokens_per_s=100)


@pytest.mark.parametrize("flag", ["--measured-tokens-per-s", "--measured-itl"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0"])
def test_a_measurement_that_is_not_a_finite_positive_number_is_a_usage_error(flag, value):
    """nan passed 'must be positive' (nan <= 0 is false): exit 0 and a report of nan; inf beat the
    roofline and exited 1, as if the physics were wrong."""
    args = ["diagnose", "--set", "model=llama-3.1-8b", "--set", "gpu=h100-sxm-80gb", "--set", "concurrency=64"]
    got = CliRunner().invoke(cli, [*args, "--set", "input_tokens=128", "--set", "output_tokens=128", flag, value])
    assert isinstance(got.exception, UsageError) and got.exception.exit_code == 2, got.output
    assert f"{flag} must be a finite number > 0" in str(got.exception)


@pytest.mark.parametrize("option", ["real_context", "shared_prefix"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_remedies_refuse_a_length_that_is_not_finite(option, value):
    """--real-context inf read as 'the reservation is already no larger', --shared-prefix nan as a
    caveat: exit 0 for a number that is not one."""
    with pytest.raises(UsageError, match="must be a finite number of tokens"):
        remedies(MEM, **{option: value})


def test_diagnose_cli_above_bound_exits_1():
    args = ["diagnose"] + [x for k, v in {**L70, "concurrency": 64}.items() for x in ("--set", f"{k}={v}")]
    res = CliRunner().invoke(cli, args + ["--measured-tokens-per-s", "5000"])
    assert isinstance(res.exception, ContradictionError) and res.exception.exit_code == 1
    res = CliRunner().invoke(cli, args + ["--measured-tokens-per-s", "1500", "--json"])
    assert json.loads(res.output)["binds"] == "bandwidth"


MEM = {
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm-80gb",
    "tp": 4,
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
    "context": "8192 token",
    "overhead": "4 GiB",
    "mem_util": 0.9,
}


def test_remedies_numbers_and_order():
    base, rows = remedies(MEM, real_context=4096, shared_prefix=2048)
    assert base.users == 55 and base.gpus == 4
    users = {r.name.split(" (")[0]: r.result.users for r in rows}
    assert [r.rank for r in rows] == [1, 2, 3, 4, 5, 6, 6]
    assert users["fp8 KV cache"] == 110
    assert users["size max-model-len from the real context"] == 110
    assert users["raise mem_util to 0.95"] == 61
    assert users["prefix caching / shorter prompts"] == 73  # floor((451,008 - 2,048) / 6,144)
    assert users["fp8 weights"] == 81
    tp = next(r for r in rows if r.name.startswith("more GPUs"))
    assert tp.change == {"tp": 8} and tp.result.users == 162 and tp.result.users_per_gpu == 20.25
    gpu = next(r for r in rows if r.name.startswith("a larger GPU"))
    assert gpu.change == {"gpu": "h200-sxm-141gb"} and gpu.result.users > 55


def test_remedies_not_applicable_and_caveats():
    _, rows = remedies({**MEM, "kv_dtype": "fp8", "tp": 8, "mem_util": 0.95})
    by_rank = {r.rank: r for r in rows}
    assert by_rank[1].result is None and "--real-context" in by_rank[1].reason
    assert by_rank[2].result is None and by_rank[3].result is None
    assert by_rank[4].result is None
    tp16 = next(r for r in rows if r.name.startswith("more GPUs"))
    assert tp16.change == {"tp": 16} and "replicated" in tp16.caveat
    _, rows = remedies(
        {"model": "deepseek-v3", "gpu": "h200-sxm-141gb", "tp": 8, "weight_dtype": "fp8", "context": "8192 token"}
    )
    assert "MLA" in next(r for r in rows if r.name.startswith("more GPUs")).caveat


def test_remedies_throughput_and_cli_json():
    base, rows = remedies({**MEM, "input_tokens": 1024, "output_tokens": 1024})
    assert base.tokens_per_s and all(r.result.tokens_per_s for r in rows if r.result is not None)
    args = ["remedies"] + [x for k, v in MEM.items() for x in ("--set", f"{k}={v}")]
    res = CliRunner().invoke(cli, args + ["--json"])
    doc = json.loads(res.output)
    assert doc["baseline"]["users"] == 55
    assert [r["users"] for r in doc["remedies"] if r["name"] == "fp8 KV cache"] == [110]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0 and "fp8 KV cache" in res.output and "caveats:" in res.output
    with pytest.raises(UsageError, match="reservation"):
        remedies({k: v for k, v in MEM.items() if k != "context"})
