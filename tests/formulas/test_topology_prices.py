"""Topology and prices by provider (issue 21, items 5 and 6).

Topology: a tensor-parallel all-reduce runs at the link it actually crosses -- the fast link
(NVLink, Infinity Fabric, an NVLink bridge) within a GPU's fast_link_domain, the slow link
(PCIe between cards, the scale-out NIC between 8-GPU boards) beyond it.

Prices: the price catalog holds one column per provider; `--set gpu=ID` prices at the
catalog's default provider and says so, `--set provider=NAME` picks another, a GPU the
provider does not list is named as such; `concur plan` compares within one provider unless
asked for `--provider all`, and shows the provider per row.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

import concur
from concur.analysis.fleet_plan import plan_fleet
from concur.analysis.providers import default_provider, listed_at, plan_providers
from concur.cli import cli
from concur.errors import UnderdeterminedError, UnknownNameError, UsageError
from concur.lang.library import get_catalog
from concur.lang.model import build_model

STEP = {
    "model": "llama-3.1-70b",
    "weight_dtype": "fp8",
    "kv_dtype": "fp8",
    "concurrency": 64,
    "input_tokens": 1000,
    "output_tokens": 400,
    "kv_fit": "ignore",
}


def _link(gpu: str, tp: int) -> float:
    """The link bandwidth (GB/s per direction) the all-reduce runs at."""
    sol = concur.solve(
        find=["tp_link_bandwidth", "t_comm"], given={**STEP, "gpu": gpu, "tp": tp}, packs="llm_throughput"
    )
    return float(sol.value("tp_link_bandwidth", "GB/s"))


def _gpu(gpu: str, field: str) -> float:
    return float(get_catalog("gpus").entries[gpu].values[field][0])


# ---------------------------------------------------------------- topology


def test_pcie_card_uses_the_bridge_at_tp2_and_pcie_beyond() -> None:
    assert _gpu("h100-pcie-80gb", "fast_link_domain") == 2
    assert _link("h100-pcie-80gb", 2) == _gpu("h100-pcie-80gb", "interconnect_bandwidth") == 300
    assert _link("h100-pcie-80gb", 4) == _link("h100-pcie-80gb", 8) == 64  # PCIe Gen5 x16 per direction


def test_hgx_board_uses_nvlink_to_tp8_and_the_scale_out_nic_beyond() -> None:
    assert _link("h100-sxm-80gb", 8) == 450
    assert _link("h100-sxm-80gb", 16) == _gpu("h100-sxm-80gb", "slow_link_bandwidth") == 50
    assert _link("mi300x", 8) == 448
    assert _link("mi300x", 16) == 50


def test_crossing_the_slow_link_costs_communication_time() -> None:
    def comm(gpu: str, tp: int) -> float:
        sol = concur.solve(find=["t_comm"], given={**STEP, "gpu": gpu, "tp": tp}, packs="llm_throughput")
        return float(sol.value("t_comm", "ms"))

    # Same message size per ring step at tp 4 and 8; only the link differs between the two GPUs.
    assert comm("h100-pcie-80gb", 4) > 2.5 * comm("h100-sxm-80gb", 4)
    assert comm("h100-pcie-80gb", 2) == pytest.approx(comm("h100-sxm-80gb", 2) * 1.0, rel=0.2)


def test_a_prompts_all_reduces_cross_the_same_link_as_the_decodes() -> None:
    """The bandwidth part of a step's all-reduces per token (what every prompt token pays) runs at
    the link tp crosses, as t_comm does: beyond the NVLink board it is the scale-out NIC's."""

    def per_token(gpu: str, tp: int) -> float:
        sol = concur.solve(
            find=["t_comm_per_token", "tp_link_bandwidth"], given={**STEP, "gpu": gpu, "tp": tp}, packs="llm_throughput"
        )
        return float(sol.value("t_comm_per_token", "s/token") * sol.value("tp_link_bandwidth", "GB/s"))

    # bytes a token moves (t x link bandwidth) grow only by the ring's 2 (tp - 1) / tp, whichever link carries them
    assert per_token("h100-sxm-80gb", 16) == pytest.approx(per_token("h100-sxm-80gb", 8) * (15 / 16) / (7 / 8))
    assert per_token("h100-pcie-80gb", 4) == pytest.approx(per_token("h100-sxm-80gb", 4))


def test_a_given_interconnect_without_a_gpu_applies_at_every_tp() -> None:
    given = {
        "model": "llama-3.1-70b",
        "tp": 16,
        "hbm_bandwidth": 3.35,
        "peak_flops_bf16": 989,
        "peak_flops_fp8": 1979,
        "interconnect_bandwidth": 450,
        "gpu_memory": 79,
        "weight_dtype": "bf16",
        "kv_dtype": "bf16",
        "concurrency": 64,
        "input_tokens": 1000,
        "output_tokens": 400,
        "kv_fit": "ignore",
    }
    sol = concur.solve(find=["tp_link_bandwidth"], given=given, packs="llm_throughput")
    assert sol.value("tp_link_bandwidth", "GB/s") == 450


def test_every_gpu_has_sourced_topology() -> None:
    for gid, entry in get_catalog("gpus").entries.items():
        dom, dom_src, _ = entry.values["fast_link_domain"]
        slow, slow_src, _ = entry.values["slow_link_bandwidth"]
        assert dom in (1, 2, 8), gid
        assert 16 <= slow <= entry.values["interconnect_bandwidth"][0], gid  # the slow link is the slower
        assert dom_src.strip() and slow_src.strip(), gid
        if dom == 1:  # PCIe-only: the fast link is PCIe itself
            assert slow == entry.values["interconnect_bandwidth"][0], gid


# ---------------------------------------------------------------- prices by provider

FLEET = {"model": "llama-3.1-70b", "arrival_rate": 50, "input_tokens": 1000, "output_tokens": 400, "tp": 4}


def test_the_price_catalog_states_its_default_provider_and_the_pack_knows_every_provider() -> None:
    prices = get_catalog("prices")
    assert prices.pick is not None and prices.pick.by == "provider" and prices.pick.sets == "gpu_hour_price"
    assert default_provider() == prices.pick.default == "aws"
    assert list(build_model(["llm_fleet"]).variables["provider"].choices) == list(prices.fields)


def test_gpu_prices_at_the_default_provider_and_says_so() -> None:
    sol = concur.solve(find=["cost_per_month"], given={**FLEET, "gpu": "h100-sxm-80gb"}, packs="llm_fleet")
    assert sol.value("gpu_hour_price", "usd/gpu/hour") == 6.88
    assert any("aws's list price" in n and "default" in n for n in sol.notes), sol.notes


def test_provider_picks_another_column() -> None:
    sol = concur.solve(
        find=["cost_per_month"], given={**FLEET, "gpu": "h100-sxm-80gb", "provider": "lambda"}, packs="llm_fleet"
    )
    assert sol.value("gpu_hour_price", "usd/gpu/hour") == 3.99
    assert any("lambda's list price" in n and "given" in n for n in sol.notes), sol.notes


def test_a_given_price_wins_and_no_provider_note_is_printed() -> None:
    sol = concur.solve(
        find=["cost_per_month"], given={**FLEET, "gpu": "h100-sxm-80gb", "gpu_hour_price": 2.0}, packs="llm_fleet"
    )
    assert sol.value("gpu_hour_price", "usd/gpu/hour") == 2.0
    assert not any("list price" in n for n in sol.notes)


def test_no_price_note_when_the_price_is_not_used() -> None:
    sol = concur.solve(find=["replicas"], given={**FLEET, "gpu": "h100-sxm-80gb"}, packs="llm_fleet")
    assert not any("list price" in n for n in sol.notes)


def test_an_unlisted_gpu_says_it_has_no_list_price_and_who_lists_it() -> None:
    with pytest.raises(UnderdeterminedError) as err:
        concur.solve(find=["cost_per_month"], given={**FLEET, "gpu": "h100-pcie-80gb"}, packs="llm_fleet")
    text = err.value.render()
    assert "h100-pcie-80gb has no list price at aws" in text and "lambda, runpod" in text
    assert "subscribers" not in text.split(":")[0]  # the reason leads, not a list of unrelated inputs
    with pytest.raises(UnderdeterminedError, match="mi300x has no list price at aws"):
        concur.solve(find=["cost_per_month"], given={**FLEET, "gpu": "mi300x"}, packs="llm_fleet")


def test_an_unknown_provider_is_a_usage_error_naming_the_known_ones() -> None:
    with pytest.raises(UnknownNameError, match="unknown provider 'gcp'") as err:
        concur.solve(
            find=["cost_per_month"], given={**FLEET, "gpu": "h100-sxm-80gb", "provider": "gcp"}, packs="llm_fleet"
        )
    assert "lambda" in err.value.render()
    res = CliRunner().invoke(cli, ["plan", "--set", "model=llama-3.1-8b", "--provider", "gcp"])
    assert isinstance(res.exception, UnknownNameError) and res.exception.exit_code == 2
    assert "unknown provider 'gcp'" in str(res.exception)


def test_plan_providers() -> None:
    assert plan_providers(None) == ["aws"]
    assert plan_providers("runpod") == ["runpod"]
    assert plan_providers("all") == list(get_catalog("prices").fields)
    assert listed_at("h100-pcie-80gb", "runpod") and not listed_at("h100-pcie-80gb", "aws")


# ---------------------------------------------------------------- plan

QUESTION = {"model": "llama-3.1-8b", "arrival_rate": 10, "input_tokens": 1000, "output_tokens": 200}
SETS = [x for k, v in QUESTION.items() for x in ("--set", f"{k}={v}")]
GRID = ["--gpus", "h100-sxm-80gb,h100-pcie-80gb,mi300x", "--tp", "1,2", "--engines", "vllm", "--weight-dtypes", "bf16"]
GRID += ["--kv-dtypes", "bf16"]


def _plan(*extra: str) -> dict[str, Any]:
    res = CliRunner().invoke(cli, ["plan", *SETS, *GRID, "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_plan_compares_within_the_default_provider() -> None:
    out = _plan()
    rows = out["candidates"]
    assert {r["provider"] for r in rows} == {"aws"}
    feasible = [r for r in rows if r["feasible"]]
    assert {r["gpu"] for r in feasible} == {"h100-sxm-80gb"}
    rejected = {(r["gpu"], r["reason"]) for r in rows if not r["feasible"]}
    assert ("h100-pcie-80gb", "no list price at aws") in rejected and ("mi300x", "no list price at aws") in rejected
    assert any("aws's on-demand list prices" in n for n in out["notes"])


def test_plan_provider_filters_to_what_that_provider_lists() -> None:
    rows = _plan("--provider", "runpod")["candidates"]
    feasible = [r for r in rows if r["feasible"]]
    assert {r["provider"] for r in rows} == {"runpod"}
    assert {r["gpu"] for r in feasible} == {"h100-sxm-80gb", "h100-pcie-80gb"}
    prices = {r["gpu"]: r["gpu_hour_price"]["value"] for r in feasible}
    assert prices == {"h100-sxm-80gb": pytest.approx(3.49), "h100-pcie-80gb": pytest.approx(2.89)}


def test_plan_provider_all_labels_every_row_with_its_provider() -> None:
    out = _plan("--provider", "all")
    feasible = [r for r in out["candidates"] if r["feasible"]]
    pairs = {(r["gpu"], r["provider"]) for r in feasible}
    assert ("h100-sxm-80gb", "aws") in pairs and ("h100-pcie-80gb", "runpod") in pairs
    assert ("h100-pcie-80gb", "aws") not in pairs
    costs = [r["cost_per_month"]["value"] for r in feasible]
    assert costs == sorted(costs)
    assert any("compares providers" in n for n in out["notes"])


def test_plan_table_shows_the_provider() -> None:
    res = CliRunner().invoke(cli, ["plan", *SETS, *GRID, "--provider", "lambda"])
    assert res.exit_code == 0, res.output
    head, first = res.output.splitlines()[:2]
    assert "provider" in head.split() and "lambda" in first.split()


def test_provider_is_an_axis_not_a_given() -> None:
    res = CliRunner().invoke(cli, ["plan", *SETS, "--set", "provider=runpod"])
    assert isinstance(res.exception, UsageError) and res.exception.exit_code == 2
    assert "--provider" in str(res.exception)


def test_plan_python_api_takes_a_provider_axis() -> None:
    axes = {
        "gpu": ["h100-pcie-80gb"],
        "tp": [1],
        "dtypes": [("bf16", "bf16")],
        "engine": ["vllm"],
        "provider": ["lambda"],
    }
    res = plan_fleet(QUESTION, axes)
    assert res.feasible and res.feasible[0].gpu_hour_price == pytest.approx(3.29)


def test_a_given_price_prices_every_row_and_names_no_provider() -> None:
    axes = {"gpu": ["mi300x", "h100-sxm-80gb"], "tp": [1], "dtypes": [("bf16", "bf16")], "engine": ["vllm"]}
    res = plan_fleet({**QUESTION, "gpu_hour_price": 2.0}, {**axes, "provider": ["aws"]})
    assert {c.config.gpu for c in res.feasible} == {"mi300x", "h100-sxm-80gb"}
    assert all(c.config.provider == "" and c.gpu_hour_price == pytest.approx(2.0) for c in res.feasible)
    assert any("given gpu_hour_price" in n for n in res.notes)


def test_a_workbook_looks_prices_up_in_the_chosen_providers_column(tmp_path) -> None:
    """The gpu dropdown's price column is the chosen provider's: pick another GPU, the price follows
    that provider's list (or reads 'not listed'), never another provider's."""
    openpyxl = pytest.importorskip("openpyxl")
    out = tmp_path / "fleet.xlsx"
    args = ["export", "llm_fleet", "--find", "cost_per_month", "-o", str(out), "--set", "provider=lambda"]
    for k, v in {**FLEET, "gpu": "h100-sxm-80gb"}.items():
        args += ["--set", f"{k}={v}"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    ws = openpyxl.load_workbook(out)["Catalogs"]
    head = next(
        c for row in ws.iter_rows() for c in row if isinstance(c.value, str) and c.value.startswith("gpu_hour_price")
    )
    column = {ws.cell(r, 1).value: ws.cell(r, head.column).value for r in range(head.row + 1, ws.max_row + 1)}
    assert column["h100-sxm-80gb"] == 3.99 and column["h100-pcie-80gb"] == 3.29
    assert column["l40s"] == "not listed"  # AWS and RunPod list it; Lambda does not
