"""Backward questions of the disaggregated fleet: a budget and SLAs -> the largest rate.

* The goal seek brackets a continuous unknown by walking a doubling grid outwards from its start
  and stops at the first change of verdict: a budget -> rate question used to try rates up to
  2^60 requests a second, whose decode pool no solve budget can size, and failed (exit 3).
* Asking for the pools and the cost as well does not change the rate: the asked-for input (the rate)
  is searched, never one of the counts it needs (searching prefill_workers answered "the fewest
  prefill workers" and a rate a third lower).
"""

from __future__ import annotations

import pytest
from helpers import T11_DISAGG

import concur

GIVEN = {
    **T11_DISAGG,
    "input_tokens": 1000,
    "output_tokens": 400,
    "itl_slo": "50 ms",
    "ttft_slo": "2 s",
    "monthly_budget": 200000,
}


def test_a_budget_gives_the_largest_rate_whatever_else_is_asked() -> None:
    alone = concur.solve(find=["arrival_rate"], given=GIVEN, packs=["llm_disagg"])
    more = concur.solve(
        find=["prefill_workers", "arrival_rate", "decode_workers", "cost_per_month"], given=GIVEN, packs=["llm_disagg"]
    )
    rate = alone.value("arrival_rate")
    assert more.value("arrival_rate") == pytest.approx(rate, rel=1e-9)
    assert more.value("cost_per_month") <= 200000
    # one more prefill or decode worker (4 GPUs) would break the budget
    per_worker = more.value("cost_per_month") / (more.value("prefill_workers") + more.value("decode_workers"))
    assert more.value("cost_per_month") + per_worker > 200000
    # and the rate is the most those pools carry: a hair more needs another worker
    above = concur.solve(
        find=["prefill_workers", "decode_workers"],
        given={k: v for k, v in {**GIVEN, "arrival_rate": rate * 1.001}.items() if k != "monthly_budget"},
        packs=["llm_disagg"],
    )
    assert above.value("prefill_workers") + above.value("decode_workers") > more.value("prefill_workers") + more.value(
        "decode_workers"
    )
