"""A goal seek whose every trial meets the targets says which variable the question leaves free."""

from __future__ import annotations

import pytest

import concur
from concur.errors import UsageError


def test_a_free_variable_is_named_with_the_targets_it_meets():
    given = {
        "model": "deepseek-v3",
        "gpu": "h200-sxm-141gb",
        "engine": "sglang",
        "prefill_tp": 8,
        "tp": 8,
        "weight_dtype": "fp8",
        "kv_dtype": "fp8",
        "kv_link": "ib-ndr-400g",
        "arrival_rate": "20 request/s",
        "input_tokens": "1000 token/request",
        "output_tokens": "400 token/request",
        "itl_slo": "50 ms",
    }
    with pytest.raises(UsageError) as caught:
        concur.solve(find=["token_budget"], given=given, packs="llm_disagg")
    exc = caught.value
    assert exc.variable == "token_budget"
    assert "every token_budget in its range gives itl_slo at most 50 ms" in exc.message
    assert "give token_budget directly" in (exc.hint or "")
