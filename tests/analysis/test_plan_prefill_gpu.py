"""``concur plan --prefill-gpus``: a disaggregated row's prefill pool on another GPU than its decode pool.

Each test can fail: the axis must only add choices (never a dearer cheapest row), a faster prefill GPU
must never need more prefill workers, each pool must be priced at its own GPU's price and sized on
its own GPU's figures (as the llm_disagg pack does with ``prefill_gpu=``), the simulator must run the
prefill pool on that GPU, the output must name it, and a plan without the axis must not move.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import T10_QUESTION, concur_child, one_error_line

from concur.analysis.fleet_axes import narrow_axes
from concur.analysis.fleet_plan import HOURS_PER_MONTH, Candidate, FleetPlan, plan_fleet, rows
from concur.api import solve
from concur.cli import cli
from concur.errors import UnknownNameError
from concur.lang.library import get_catalog
from concur.lang.model import build_model

H100, B200 = "h100-sxm-80gb", "b200"
QUESTION = T10_QUESTION
CLI = [
    "plan",
    "--modes",
    "agg,disagg",
    *(x for k, v in QUESTION.items() for x in ("--set", f"{k}={v}")),
    "--gpus",
    H100,
    "--engines",
    "vllm",
]


def _plan(prefill_gpus: tuple[str, ...] = (), **question: Any) -> FleetPlan:
    axes = narrow_axes(build_model(["llm_fleet"]), {"gpus": [H100], "engines": ["vllm"]}, model_id="llama-3.1-70b")
    return plan_fleet({**QUESTION, **question}, axes, modes=("agg", "disagg"), prefill_gpus=prefill_gpus)


@pytest.fixture(scope="module")
def plain() -> FleetPlan:
    return _plan()


@pytest.fixture(scope="module")
def both() -> FleetPlan:
    return _plan((H100, B200))


def _disagg(result: FleetPlan) -> list[Candidate]:
    return [c for c in result.candidates if c.mode == "disagg"]


def _layout(c: Candidate) -> tuple[Any, ...]:
    k = c.config
    return (k.gpu, k.tp, k.weight_dtype, k.kv_dtype, k.engine, k.provider, k.spec, k.ep, k.dp_attention)


def test_the_axis_never_makes_the_cheapest_disagg_row_dearer(plain: FleetPlan, both: FleetPlan) -> None:
    cheapest = [min(c.cost_per_month or 1e99 for c in _disagg(r) if c.feasible) for r in (plain, both)]
    assert cheapest[1] <= cheapest[0] < 1e99
    # every row without the axis is still there, the same, beside one on B200
    before = {_layout(c): c for c in _disagg(plain)}
    same = {_layout(c): c for c in _disagg(both) if not c.config.prefill_gpu}
    assert set(same) == set(before)
    for key, c in same.items():
        assert list(rows(FleetPlan({}, [c]))) == list(rows(FleetPlan({}, [before[key]])))
    assert {c.config.prefill_gpu for c in _disagg(both)} == {"", B200}


def test_a_b200_prefill_pool_never_needs_more_workers(both: FleetPlan) -> None:
    pools: dict[tuple[Any, ...], dict[str, Candidate]] = {}
    for c in _disagg(both):
        if c.feasible:
            pools.setdefault(_layout(c), {})[c.config.prefill_gpu or H100] = c
    pairs = [p for p in pools.values() if len(p) == 2]
    assert len(pairs) >= 10
    for p in pairs:
        h, b = p[H100], p[B200]
        assert (b.prefill_workers or 0) * (b.prefill_tp or 0) <= (h.prefill_workers or 0) * (h.prefill_tp or 0)
        assert (b.replicas, b.itl) == (h.replicas, h.itl)  # the decode pool stays on the H100
        assert b.ttft is not None and h.ttft is not None and b.ttft < h.ttft
    # one prefill TP for both: B200 needs no more workers of it (and fewer at bf16, 2.27x H100's peak)
    fixed = _plan((H100, B200), prefill_tp=4)
    by: dict[tuple[Any, ...], dict[str, Candidate]] = {}
    for c in _disagg(fixed):
        if c.feasible:
            by.setdefault(_layout(c), {})[c.config.prefill_gpu or H100] = c
    tp4 = [p for p in by.values() if len(p) == 2]
    assert tp4 and all(p[B200].prefill_workers <= p[H100].prefill_workers for p in tp4)  # type: ignore[operator]
    assert any(p[B200].prefill_workers < p[H100].prefill_workers for p in tp4)  # type: ignore[operator]


def test_the_row_is_the_packs_answer_with_each_pool_at_its_own_price() -> None:
    result = _plan((B200,), prefill_tp=4, kv_link="ib-ndr-400g")
    (row,) = [
        c
        for c in _disagg(result)
        if c.feasible and (c.config.tp, c.config.weight_dtype, c.config.kv_dtype) == (4, "bf16", "bf16")
    ]
    given = {
        **QUESTION,
        "arrival_rate": "50 request/s",
        "input_tokens": "1000 token/request",
        "output_tokens": "400 token/request",
        "gpu": H100,
        "prefill_gpu": B200,
        "engine": "vllm",
        "tp": 4,
        "prefill_tp": 4,
        "weight_dtype": "bf16",
        "kv_dtype": "bf16",
        "kv_link": "ib-ndr-400g",
    }
    sol = solve(find=["prefill_workers", "decode_workers", "cost_per_hour"], given=given, packs="llm_disagg")
    assert (row.prefill_workers, row.replicas) == (sol.values["prefill_workers"], sol.values["decode_workers"])
    per_hour = float(sol["cost_per_hour"].to("usd/hour").magnitude)
    assert row.cost_per_month == pytest.approx(per_hour * HOURS_PER_MONTH, rel=1e-9)
    b200_price = get_catalog("prices").entries[B200].values["aws"][0]
    assert row.prefill_gpu_hour_price == pytest.approx(b200_price)
    assert row.cost_per_month == pytest.approx(
        ((row.prefill_workers or 0) * 4 * b200_price + (row.replicas or 0) * 4 * (row.gpu_hour_price or 0))
        * HOURS_PER_MONTH
    )
    # the prefill pool's HBM share is of B200's bandwidth (8 TB/s), not of the H100's (3.35 TB/s): one
    # read of the weights per full pass of eight 1,000-token prompts (the 8,192-token budget)
    weights_per_gpu = get_catalog("models").entries["llama-3.1-70b"].values["params"][0] * 2 / 4  # bf16, TP4
    want = 50 / (row.prefill_workers or 1) * weights_per_gpu / 8 / 8e12
    assert row.prefill_bandwidth_utilization == pytest.approx(want, rel=0.01)


def test_a_prefill_gpu_without_a_list_price_is_not_priced_at_the_decode_gpus() -> None:
    result = _plan(("mi300x",))
    rows_ = _disagg(result)
    assert rows_ and not any(c.feasible for c in rows_)
    assert {c.reason for c in rows_ if c.prefill_workers} == {"no list price at aws for mi300x"}


def test_nvlink_cannot_join_two_gpu_types(both: FleetPlan) -> None:
    result = _plan((B200,), kv_link="nvlink-4")
    cross = _disagg(result)
    assert cross and not any(c.feasible for c in cross)
    refused = [c for c in cross if c.rejection and c.rejection["variable"] == "kv_link_domain"]
    assert refused and all("scale-out link" in c.reason for c in refused)


def test_a_bad_id_gets_one_line_with_did_you_mean() -> None:
    with pytest.raises(UnknownNameError) as info:
        _plan(("b20",))
    assert info.value.field == "prefill_gpus" and "did you mean b200?" in info.value.render()
    res = concur_child(*CLI, "--prefill-gpus", "b20")
    assert res.returncode == 2 and "unknown prefill_gpu 'b20'; did you mean b200?" in one_error_line(res)
    agg_only = concur_child(*CLI[:1], *CLI[3:], "--prefill-gpus", B200)
    assert agg_only.returncode == 2 and "add --modes agg,disagg" in one_error_line(agg_only)
    given = concur_child(*CLI, "--set", "prefill_gpu=b200")  # the axis given as a value
    assert (
        given.returncode == 2 and "prefill_gpu is an axis" in one_error_line(given) and "--prefill-gpus" in given.stderr
    )


def test_table_side_by_side_csv_and_json_name_the_prefill_gpu() -> None:
    runner = CliRunner()
    fp8 = ["--tp", "2", "--weight-dtypes", "fp8", "--kv-dtypes", "fp8", "--prefill-gpus", B200]
    text = runner.invoke(cli, [*CLI, *fp8])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert "2P3D: prefill 2 x TP2 on b200, decode 3 x TP2" in lines[2]  # the cheapest per mode (--tp: both pools)
    assert any(" P2 b200/D2 " in line and "$14.24/$6.88" in line for line in lines)
    out = runner.invoke(cli, [*CLI, *fp8, "--csv", "-"]).output
    table = list(csv.DictReader(io.StringIO(out)))
    cross = [r for r in table if r["mode"] == "disagg" and r["feasible"] == "True"]
    assert cross and {(r["prefill_gpu"], r["prefill_gpu_hour_price_usd"]) for r in cross} == {(B200, "14.2416")}
    assert {r["prefill_gpu"] for r in table if r["mode"] == "agg"} == {""}
    data = json.loads(runner.invoke(cli, [*CLI, *fp8, "--json"]).output)["candidates"]
    row = next(r for r in data if r["mode"] == "disagg" and r["feasible"])
    assert row["prefill"]["gpu"] == B200 and row["decode"]["gpu"] == H100 and row["gpu"] == H100
    assert row["prefill_gpu_hour_price"] == {"value": pytest.approx(14.2416), "unit": "usd/gpu/hour"}
    # without the axis the CSV keeps its columns
    plain = runner.invoke(cli, [*CLI, *fp8[:-2], "--csv", "-"]).output
    assert "prefill_gpu," not in plain.splitlines()[0] and plain.splitlines()[0].endswith(",nodes")


def test_verify_simulates_the_prefill_pool_on_its_gpu() -> None:
    from dataclasses import replace

    from concur.analysis.verify import verify_disagg_row

    result = _plan((B200,), prefill_tp=2)
    cand = next(c for c in result.feasible if c.mode == "disagg" and c.config.prefill_gpu == B200)
    assert cand.prefill == {"gpu": B200, "tp": 2, "workers": cand.prefill_workers}
    on_h100 = replace(cand, config=replace(cand.config, prefill_gpu=""))  # the same pools, prefill on the H100
    slo = {"ttft_slo": 2.0, "itl_slo": 0.05}
    # at 20 request/s, which the B200 row's two prefill workers also carry on H100s (62 % busy)
    fast, slow = (verify_disagg_row(QUESTION, c, 20.0, slo, requests=400) for c in (cand, on_h100))
    assert fast.result is not None and slow.result is not None
    assert fast.result.ttft.mean < 0.7 * slow.result.ttft.mean  # B200's prefill, about 2.3x the FLOP/s
    assert fast.result.tpot.mean == pytest.approx(slow.result.tpot.mean, rel=0.05)  # decode: the H100s alike


def _cross(result: FleetPlan) -> list[Candidate]:
    return [c for c in _disagg(result) if c.feasible and c.config.prefill_gpu]


def test_a_given_gpu_hour_price_is_the_decode_gpus_and_a_b200_prefill_pool_keeps_its_list_price() -> None:
    """gpu_hour_price is the H100's: it prices the decode pools and a prefill pool on H100 too, never
    the B200 prefill pool, which keeps its list price and a note says so."""
    result = _plan((H100, B200), gpu_hour_price=2)
    b200_price = get_catalog("prices").entries[B200].values["aws"][0]
    cross = _cross(result)
    assert cross
    for c in cross:
        assert (c.gpu_hour_price, c.prefill_gpu_hour_price) == (pytest.approx(2.0), pytest.approx(b200_price))
        prefill = (c.prefill_workers or 0) * (c.prefill_tp or 0)
        want = (prefill * b200_price + ((c.fleet_gpus or 0) - prefill) * 2.0) * HOURS_PER_MONTH
        assert c.cost_per_month == pytest.approx(want)
    same = [c for c in _disagg(result) if c.feasible and not c.config.prefill_gpu]
    assert same and all(c.cost_per_month == pytest.approx((c.fleet_gpus or 0) * 2.0 * HOURS_PER_MONTH) for c in same)
    (note,) = [n for n in result.notes if "prefill_gpu_hour_price" in n]
    assert f"prefill pools on {B200} (${b200_price:,.2f}/GPU-hour) are at aws's on-demand list price" in note
    assert not any(
        n == "every row is priced at the given gpu_hour_price, not at a provider's list price" for n in result.notes
    )


def test_a_given_prefill_gpu_hour_price_prices_the_other_gpu_type() -> None:
    for question in ({"gpu_hour_price": 2}, {}):  # with the user's H100 price, and at the H100's list price
        result = _plan((H100, B200), prefill_gpu_hour_price="5 usd/gpu/hour", **question)
        cross = _cross(result)
        assert cross and all(c.prefill_gpu_hour_price == pytest.approx(5.0) for c in cross)
        decode = 2.0 if question else get_catalog("prices").entries[H100].values["aws"][0]
        for c in cross:
            prefill = (c.prefill_workers or 0) * (c.prefill_tp or 0)
            want = (prefill * 5.0 + ((c.fleet_gpus or 0) - prefill) * decode) * HOURS_PER_MONTH
            assert c.cost_per_month == pytest.approx(want)
        assert any(
            "prefill pools on b200 are priced at the given prefill_gpu_hour_price ($5.00" in n for n in result.notes
        )


def test_a_prefill_gpu_without_a_list_price_asks_for_prefill_gpu_hour_price() -> None:
    result = _plan(("mi300x",), gpu_hour_price=2)
    cross = [c for c in _disagg(result) if c.config.prefill_gpu and c.prefill_workers]
    assert cross and all(c.cost_per_month is None for c in cross)
    assert {c.reason for c in cross if c.feasible} == {
        "no public list price for mi300x: give prefill_gpu_hour_price=..."
    }
    assert any("give prefill_gpu_hour_price=... to cost them" in n for n in result.notes)
    priced = _plan(("mi300x",), gpu_hour_price=2, prefill_gpu_hour_price=3)
    assert [c for c in _cross(priced) if c.cost_per_month is not None and c.prefill_gpu_hour_price == pytest.approx(3)]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--set", "prefill_gpu_hour_price=5"), "and the plan has none"),  # no --prefill-gpus
        (("--prefill-gpus", H100, "--set", "prefill_gpu_hour_price=5"), "and the plan has none"),  # the same type
        (("--prefill-gpus", f"{B200},mi300x", "--set", "prefill_gpu_hour_price=5"), "the price of one GPU type"),
        (("--prefill-gpus", B200, "--set", "prefill_gpu_hour_price=-5"), "below its lower bound"),
        (("--prefill-gpus", B200, "--set", "prefill_gpu_hour_price=5 GB"), "does not fit"),
    ],
)
def test_a_prefill_gpu_hour_price_that_prices_nothing_or_two_types_is_one_line(
    args: tuple[str, ...], words: str
) -> None:
    res = concur_child(*CLI, *args)
    line = one_error_line(res)
    assert res.returncode == 2 and "prefill_gpu_hour_price" in line and words in line and "Traceback" not in res.stderr
