"""Backward questions of the disaggregated fleet: a budget and SLAs -> the largest rate.

* The goal seek brackets a continuous unknown by walking a doubling grid outwards from its start
  and stops at the first change of verdict: a budget -> rate question used to try rates up to
  2^60 requests a second, whose decode pool no solve budget can size, and failed (exit 3).
* Asking for the pools and the cost as well does not change the rate: the asked-for input (the rate)
  is searched, never one of the counts it needs (searching prefill_workers answered "the fewest
  prefill workers" and a rate a third lower).
* A budget and a rate -> the GPU price: without prefill_gpu both pools run on gpu and the prefill
  price follows the one asked for (refused before, as if the two prices were two unknowns).
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
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


PRICE = {**GIVEN, "arrival_rate": 50, "monthly_budget": 150000}
HOURS = 730  # hours_per_month


def test_a_budget_gives_the_gpu_price_of_both_pools_without_a_prefill_gpu() -> None:
    sol = concur.solve(find=["gpu_hour_price", "fleet_gpus"], given=PRICE, packs="llm_disagg")
    gpus = sol.value("fleet_gpus")
    assert gpus == 32  # 5P3D of TP4 at 50 requests a second (docs/t11-serving-modes.md)
    price = sol.value("gpu_hour_price")
    assert price == pytest.approx(150000 / (gpus * HOURS), rel=1e-6)
    assert sol.value("prefill_gpu_hour_price") == price  # computed on the way: one price for both pools
    # back: that price given, the month costs the budget (the prefill pool takes the typed price)
    back = concur.solve(
        find=["cost_per_month"],
        given={
            **{k: v for k, v in PRICE.items() if k != "monthly_budget"},
            "gpu_hour_price": f"{price!r} usd/gpu/hour",
        },
        packs="llm_disagg",
    )
    assert back.value("cost_per_month") == pytest.approx(150000, rel=1e-6)
    assert back.givens.sources["prefill_gpu_hour_price"] == "as gpu_hour_price"


@pytest.mark.parametrize(
    ("prefill", "prefill_gpus", "prefill_price"),
    [("b200", 8, 14.2416), ("h100-sxm-80gb", 20, 6.88)],  # aws list prices (catalogs/prices.yaml)
)
def test_a_named_prefill_gpu_keeps_its_list_price_and_the_decode_price_is_found(
    prefill: str, prefill_gpus: int, prefill_price: float
) -> None:
    sol = concur.solve(
        find=["gpu_hour_price", "prefill_gpus"], given={**PRICE, "prefill_gpu": prefill}, packs="llm_disagg"
    )
    assert sol.value("prefill_gpus") == prefill_gpus
    decode_gpus = 12  # 3 decode workers of TP4 whatever the prefill GPU
    want = (150000 / HOURS - prefill_gpus * prefill_price) / decode_gpus
    assert sol.value("gpu_hour_price") == pytest.approx(want, rel=1e-6)
    # a prefill price typed stays that price too
    typed = concur.solve(
        find=["gpu_hour_price"], given={**PRICE, "prefill_gpu_hour_price": "10 usd/gpu/hour"}, packs="llm_disagg"
    )
    assert typed.value("gpu_hour_price") == pytest.approx((150000 / HOURS - 20 * 10) / decode_gpus, rel=1e-6)


def test_the_cli_answers_the_budgets_gpu_price_in_one_line() -> None:
    from concur.cli import cli

    args = ["solve", "llm_disagg", "--find", "gpu_hour_price"]
    for name, value in {**PRICE, "itl_slo": "50ms", "ttft_slo": "2s"}.items():
        args += ["--set", f"{name}={value}"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[0]
    assert first.startswith("gpu_hour_price  6.42123 usd/gpu/hour  largest gpu_hour_price giving")
    assert "monthly_budget at most 150000 usd/month (it gives 150000 usd/month)" in first
    assert "assumed gpu_hour_price" not in res.output  # the answer, not the list price it replaced
