"""Disaggregated prefill/decode serving: the llm_disagg pack, the links catalog and ``plan --modes``.

Each test can fail: the link bound is a real constraint, TTFT must include the transfer, the decode
pool's steps must carry no prompt, the solver must answer both directions, the plan JSON must have
the documented shape, and the aggregated answers must not move.
"""

from __future__ import annotations

import itertools
import json

import pytest
from click.testing import CliRunner
from helpers import T11_DISAGG, concur_child, one_error_line

from concur.api import solve
from concur.cli import cli
from concur.errors import InfeasibleError
from concur.maths.erlang import md_c_wait

BASE = {
    **T11_DISAGG,
    "input_tokens": "1000 token/request",
    "output_tokens": "400 token/request",
}


_UNITS = {
    "kv_transfer_bytes": "B/request",
    "kv_transfer_time": "s",
    "ttft": "s",
    "itl": "s",
    "t_step": "s",
    "prefill_service": "s",
    "prefill_comm": "s",
    "prefill_kv_room": "B",
    "prefill_wait": "s",
}


def _values(find: list[str], **given: object) -> dict[str, float]:
    """The answers as plain numbers: bytes, seconds, counts."""
    sol = solve(find=find, given={**BASE, **given}, packs="llm_disagg")
    return {n: float(sol[n].to(_UNITS[n]).magnitude) if n in _UNITS else float(sol.values[n]) for n in find}


def test_kv_transfer_is_the_whole_prompts_cache_over_the_link() -> None:
    # Llama-3.1-70B: 2 x 80 layers x 8 KV heads x 128 x 2 B = 327,680 B per token, whatever the TP
    v = _values(["kv_transfer_bytes", "kv_transfer_time"], arrival_rate="50 request/s")
    assert v["kv_transfer_bytes"] == pytest.approx(1000 * 327_680)
    # 50 GB/s per GPU over min(4, 4) paths, after 2.26 us
    assert v["kv_transfer_time"] == pytest.approx(2.26e-6 + 327.68e6 / (4 * 50e9))


def test_ttft_includes_the_transfer() -> None:
    fast = _values(["ttft", "kv_transfer_time"], arrival_rate="50 request/s", prefill_workers=5)
    slow = _values(["ttft", "kv_transfer_time"], arrival_rate="50 request/s", prefill_workers=5, kv_link="pcie-gen5")
    assert slow["ttft"] - fast["ttft"] == pytest.approx(slow["kv_transfer_time"] - fast["kv_transfer_time"], rel=1e-9)
    slower = _values(
        ["ttft", "kv_transfer_time"], arrival_rate="50 request/s", prefill_workers=5, kv_link_bandwidth="2 GB/s"
    )
    assert slower["kv_transfer_time"] > 0.04  # 327.68 MB over 4 x 2 GB/s
    assert slower["ttft"] - fast["ttft"] == pytest.approx(slower["kv_transfer_time"] - fast["kv_transfer_time"])


def test_a_link_that_cannot_carry_the_rate_is_impossible() -> None:
    # 50 request/s x 327.68 MB = 16.4 GB/s, over 0.05 GB/s x 12 decode GPUs: no fleet of this shape serves it
    with pytest.raises(InfeasibleError, match="the KV link would carry"):
        _values(
            ["prefill_workers", "decode_workers", "kv_link_load"],
            arrival_rate="50 request/s",
            kv_link_bandwidth="0.05 GB/s",
        )
    ok = _values(["kv_link_load"], arrival_rate="50 request/s", prefill_workers=5, decode_workers=3)
    assert ok["kv_link_load"] == pytest.approx(50 * 327.68e6 / (50e9 * 12))


def test_the_cli_says_so_in_one_line_with_exit_3() -> None:
    sets = [f"--set={k}={v}" for k, v in BASE.items()]
    res = concur_child(
        "solve",
        "llm_disagg",
        "--find",
        "decode_workers",
        "--set",
        "arrival_rate=50",
        "--set",
        "kv_link_bandwidth=0.05",
        *sets,
    )
    assert res.returncode == 3 and "the KV link would carry" in one_error_line(res)


def test_unknown_link_and_missing_link_name_the_variable() -> None:
    sets = [f"--set={k}={v}" for k, v in BASE.items() if k != "kv_link"]
    bad = concur_child(
        "solve", "llm_disagg", "--find", "ttft", "--set", "kv_link=ib-xdr", "--set", "arrival_rate=50", *sets
    )
    assert bad.returncode == 2 and "kv_link 'ib-xdr'" in one_error_line(bad)
    none = concur_child("solve", "llm_disagg", "--find", "ttft", "--set", "arrival_rate=50", *sets)
    assert none.returncode == 2 and "kv_link_bandwidth" in one_error_line(none)


def test_decode_pool_carries_no_prefill() -> None:
    v = _values(
        ["prefill_tokens_per_step", "itl", "t_step", "spec_tokens_per_step", "prefill_load"],
        arrival_rate="50 request/s",
    )
    assert v["prefill_tokens_per_step"] == 0 and v["prefill_load"] == 0
    assert v["itl"] == pytest.approx(v["t_step"] / v["spec_tokens_per_step"], rel=1e-12)


def test_solver_answers_both_directions() -> None:
    fwd = _values(["prefill_workers", "decode_workers", "fleet_gpus", "xpyd_ratio"], arrival_rate="50 request/s")
    assert (fwd["prefill_workers"], fwd["decode_workers"], fwd["fleet_gpus"]) == (5, 3, 32)
    assert fwd["xpyd_ratio"] == pytest.approx(5 / 3)
    # one pool given: the largest rate it carries; a little more needs another worker
    tops = []
    for pool, workers in (("prefill_workers", 5), ("decode_workers", 3)):
        top = _values(["arrival_rate"], **{pool: workers})["arrival_rate"]
        assert _values([pool], arrival_rate=f"{top * 0.999} request/s")[pool] == workers
        assert _values([pool], arrival_rate=f"{top * 1.01} request/s")[pool] == workers + 1
        tops.append(top)
    # both pools given: the largest rate both carry, the smaller of the two (it once answered some
    # root of the two rounding equations, 44.7 for a 5P3D fleet that carries 52.7)
    back = _values(["arrival_rate"], prefill_workers=5, decode_workers=3)["arrival_rate"]
    assert back == pytest.approx(min(tops), rel=1e-6)
    at = _values(["prefill_workers", "decode_workers"], arrival_rate=f"{back} request/s")
    assert (at["prefill_workers"], at["decode_workers"]) == (5, 3)
    assert back > 4 * 0.8 / _values(["prefill_service"], arrival_rate="1 request/s")["prefill_service"]


def test_ttft_target_raises_the_prefill_pool() -> None:
    loose = _values(["prefill_workers", "ttft"], arrival_rate="50 request/s", ttft_slo="2 s")
    tight = _values(["prefill_workers", "ttft"], arrival_rate="50 request/s", ttft_slo="130 ms")
    assert tight["prefill_workers"] > loose["prefill_workers"] and tight["ttft"] <= 0.130


def test_prefill_wait_is_one_queue_in_front_of_the_pool() -> None:
    """The prefill pool is one M/D/c queue (the routers send a prompt to a free worker): at one worker
    its wait is the exact M/D/1 wait rho x service / (2 (1 - rho)) it always was; at five it is
    Cosmetatos's M/D/c wait, a small fraction of the M/D/1 wait of one worker's even share."""
    find = ["prefill_wait", "prefill_service", "prefill_pool_load"]
    one = _values(find, arrival_rate="10 request/s", prefill_workers=1)
    rho, service = one["prefill_pool_load"], one["prefill_service"]
    assert 0.6 < rho < 0.8
    assert one["prefill_wait"] == pytest.approx(rho * service / (2 * (1 - rho)), rel=1e-12)
    five = _values(find, arrival_rate="50 request/s", prefill_workers=5)
    rho, service = five["prefill_pool_load"], five["prefill_service"]
    assert 0.6 < rho < 0.8
    assert five["prefill_wait"] == pytest.approx(md_c_wait(5, 5 * rho, service), rel=1e-9)
    assert five["prefill_wait"] < 0.2 * rho * service / (2 * (1 - rho))


PLAN = [
    "plan",
    "--modes",
    "agg,disagg",
    "--set",
    "model=llama-3.1-70b",
    "--set",
    "arrival_rate=50",
    "--set",
    "input_tokens=1000",
    "--set",
    "output_tokens=400",
    "--set",
    "ttft_slo=2s",
    "--set",
    "itl_slo=50ms",
    "--gpus",
    "h100-sxm-80gb",
    "--weight-dtypes",
    "bf16",
    "--kv-dtypes",
    "bf16",
    "--engines",
    "vllm",
]


@pytest.fixture(scope="module")
def plan_json() -> list[dict[str, object]]:
    res = CliRunner().invoke(cli, [*PLAN, "--json"])
    assert res.exit_code == 0, res.output
    return list(json.loads(res.output)["candidates"])


def test_plan_json_shape(plan_json: list[dict[str, object]]) -> None:
    modes = {r["mode"] for r in plan_json}
    assert modes == {"agg", "disagg"}
    for row in plan_json:
        if row["mode"] == "agg":
            assert "prefill" not in row and "decode" not in row
            continue
        pre, dec = row["prefill"], row["decode"]
        assert isinstance(pre, dict) and isinstance(dec, dict)
        assert set(pre) == set(dec) == {"gpu", "tp", "workers"}
        if row["feasible"]:
            assert dec["workers"] == row["replicas"] and dec["tp"] == row["tp"]
            assert row["fleet_gpus"] == pre["workers"] * pre["tp"] + dec["workers"] * dec["tp"]
            for name in (
                "compute_utilization",
                "bandwidth_utilization",
                "prefill_compute_utilization",
                "prefill_bandwidth_utilization",
            ):
                assert 0 < row[name] <= 1, name  # type: ignore[operator]
            assert 0 < row["kv_link_load"] <= 1  # type: ignore[operator]


def test_plan_disagg_agrees_with_the_solver() -> None:
    """The plan row's pools and its TTFT are the solver's: the same quantity, the decode worker's first
    step included (a plan that left it out was 53 ms short of the pack's 142.9 ms here)."""
    res = CliRunner().invoke(cli, [*PLAN, "--json", "--set", "prefill_tp=4", "--tp", "4"])
    rows = json.loads(res.output)["candidates"]
    row = next(r for r in rows if r["mode"] == "disagg" and r["feasible"])
    find = ["prefill_workers", "decode_workers", "ttft", "t_step"]
    v = _values(find, arrival_rate="50 request/s", itl_slo="50 ms", ttft_slo="2 s")
    assert (row["prefill"]["workers"], row["decode"]["workers"]) == (v["prefill_workers"], v["decode_workers"])  # type: ignore[index]
    assert row["ttft"]["unit"] == "ms"  # type: ignore[index]
    assert row["ttft"]["value"] / 1e3 == pytest.approx(v["ttft"], rel=1e-6)  # type: ignore[index]
    bare = v["ttft"] - 1.5 * v["t_step"]  # queue + prefill + transfer alone
    assert abs(row["ttft"]["value"] / 1e3 - bare) > 0.04  # type: ignore[index]


def test_plan_text_shows_cheapest_per_mode_with_the_split() -> None:
    res = CliRunner().invoke(cli, PLAN)
    assert res.exit_code == 0, res.output
    head = res.output.splitlines()[:7]
    assert head[0].split() == ["cheapest", "per", "mode", "agg", "disagg"]
    assert any("P" in line and "D:" in line and "prefill" in line for line in head)


def test_agg_plan_unchanged_by_default() -> None:
    runner = CliRunner()
    agg = json.loads(runner.invoke(cli, ["plan", *PLAN[3:], "--json"], catch_exceptions=False).output)["candidates"]
    assert {r["mode"] for r in agg} == {"agg"}
    both = json.loads(runner.invoke(cli, [*PLAN, "--json"]).output)["candidates"]
    key = lambda r: (r["gpu"], r["tp"], r["engine"])
    same = {key(r): (r["replicas"], r["fleet_gpus"]) for r in both if r["mode"] == "agg"}
    assert same == {key(r): (r["replicas"], r["fleet_gpus"]) for r in agg}
    # the README's aggregated answer: 7 x TP4 = 28 H100
    readme = {
        **{k: BASE[k] for k in ("model", "gpu", "tp", "weight_dtype", "kv_dtype", "input_tokens", "output_tokens")}
    }
    sol = solve(find=["replicas", "fleet_gpus"], given={**readme, "arrival_rate": "50 request/s"}, packs="llm_fleet")
    assert (float(sol.values["replicas"]), float(sol.values["fleet_gpus"])) == (7, 28)


def test_a_slow_link_rejects_disagg_rows_with_a_structured_reason() -> None:
    res = CliRunner().invoke(cli, [*PLAN, "--json", "--set", "kv_link_bandwidth=0.5", "--set", "kv_link_latency=1"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["candidates"]
    disagg = [r for r in rows if r["mode"] == "disagg"]
    assert disagg and not any(r["feasible"] for r in disagg)
    assert {r["rejection"]["kind"] for r in disagg if r["rejection"]} == {"link"}


DSV3_PLAN = [
    "plan",
    "--modes",
    "agg,disagg",
    *("--set", "model=deepseek-v3", "--set", "arrival_rate=20", "--set", "input_tokens=1000"),
    *("--set", "output_tokens=400", "--gpus", "h200-sxm-141gb", "--weight-dtypes", "fp8", "--kv-dtypes", "fp8"),
    *("--engines", "sglang", "--tp", "8", "--layouts", "ep"),
]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ([*PLAN, "--set", "prefill_tp=3"], "prefill pool: no prefill TP of 3 divides the attention heads (64)"),
        (
            [*DSV3_PLAN, "--set", "prefill_tp=4"],
            "prefill pool: an EP or DP-attention layout runs both pools at the decode TP (8), not at prefill TP 4",
        ),
    ],
    ids=["heads", "one-layout"],
)
def test_a_prefill_tp_the_pack_refuses_is_named_as_the_reason(args: list[str], reason: str) -> None:
    """A fixed prefill TP that llm_disagg's input checks refuse is the rows' reason, not a memory fit."""
    res = CliRunner().invoke(cli, [*args, "--json"])
    rows = json.loads(res.output)["candidates"]
    disagg = [r for r in rows if r["mode"] == "disagg" and (r["reason"] or "").startswith("prefill pool")]
    assert disagg and {r["reason"] for r in disagg} == {reason}


def test_nvlink_domain_rejects_workers_that_do_not_share_a_board() -> None:
    res = CliRunner().invoke(cli, [*PLAN, "--json", "--set", "kv_link=nvlink-4", "--tp", "8"])
    rows = json.loads(res.output)["candidates"]
    disagg = [r for r in rows if r["mode"] == "disagg"]
    # decode TP8 + any prefill TP exceeds the 8 GPUs of one NVLink board
    assert disagg and all(r["rejection"] and r["rejection"]["variable"] == "kv_link_domain" for r in disagg)


def test_spec_decoding_at_acceptance_zero_is_never_faster() -> None:
    for model, tp in (("llama-3.1-8b", 1), ("llama-3.1-70b", 4)):
        for batch in (1, 8, 64, 256):
            given = {
                "model": model,
                "gpu": "h100-sxm-80gb",
                "tp": tp,
                "engine": "vllm",
                "input_tokens": "1000 token/request",
                "output_tokens": "400 token/request",
                "concurrency": f"{batch} request",
                "kv_fit": "ignore",
            }
            plain = float(solve(find=["itl"], given=given, packs="llm_throughput").values["itl"])  # base units, both
            for k in (1, 3, 5):
                for draft in ({"mtp_layers": 1}, {"draft_params": "1.24e9 parameter", "draft_layers": 16}):
                    spec = solve(
                        find=["itl", "spec_speedup"],
                        given={**given, "draft_tokens": k, "acceptance_rate": 0, **draft},
                        packs="llm_throughput",
                    )
                    assert float(spec.values["itl"]) >= plain
                    assert float(spec.values["spec_speedup"]) <= 1


def test_spec_axis_doubles_the_rows_and_only_on_rows_carry_speculation() -> None:
    res = CliRunner().invoke(cli, [*PLAN, "--json", "--spec", "off,on", "--tp", "4"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["candidates"]
    assert sorted(r["spec"] for r in rows) == ["off", "off", "on", "on"]
    by = {(r["mode"], r["spec"]): r for r in rows}
    # one draft token accepted 85% of the time: the decode pool runs each step longer but emits more
    # tokens per step, so at the same ITL target it needs no more decode workers
    assert by[("disagg", "on")]["decode"]["workers"] <= by[("disagg", "off")]["decode"]["workers"]
    assert by[("disagg", "on")]["prefill"] == by[("disagg", "off")]["prefill"]


def test_spec_axis_refuses_speculation_given_by_hand() -> None:
    res = concur_child("plan", *PLAN[1:], "--spec", "off,on", "--set", "acceptance_rate=0.6")
    assert res.returncode == 2 and "acceptance_rate" in one_error_line(res)


def test_spec_preset_is_sourced_and_matches_the_pack() -> None:
    from concur.analysis.fleet_plan import SPEC_PRESET, spec_given
    from concur.lang.library import get_catalog

    entry = get_catalog("speculators").entries[SPEC_PRESET]
    assert all("arXiv:2412.19437" in src for _v, src, _w in entry.values.values())
    assert spec_given() == {"draft_tokens": 1, "mtp_layers": 1, "acceptance_rate": 0.85}


def test_plan_prefill_pool_matches_the_solver_when_the_ttft_target_binds() -> None:
    from concur.analysis.fleet_plan import default_axes, plan_fleet
    from concur.lang.model import build_model

    question = {
        "model": "llama-3.1-70b",
        "arrival_rate": 50,
        "input_tokens": 1000,
        "output_tokens": 400,
        "ttft_slo": "130 ms",
        "prefill_tp": 4,
        "kv_link": "ib-ndr-400g",
    }
    axes = default_axes(build_model(["llm_fleet"]), question)
    axes.update(gpu=["h100-sxm-80gb"], tp=[4], dtypes=[("bf16", "bf16")], engine=["vllm"])
    result = plan_fleet(question, axes, modes=("disagg",))
    (row,) = result.candidates
    assert row.feasible and row.mode == "disagg" and row.ttft is not None and row.ttft <= 0.130
    solver = _values(["prefill_workers", "ttft"], arrival_rate="50 request/s", ttft_slo="130 ms")
    # the target, not the compute (5 workers), binds: the prefill (72 ms), the transfer and the decode
    # worker's first step (55 ms) leave the pool's M/D/c queue 3 ms: 6 workers (one M/D/1 queue per
    # worker with an even share of the prompts would ask 42)
    assert row.prefill_workers == solver["prefill_workers"] == 6
    assert row.ttft == pytest.approx(solver["ttft"], rel=1e-6)


def test_prefill_service_against_measured_idle_ttfts() -> None:
    """A prefill worker's time for one prompt is what a concurrency-1 TTFT measures (plus half a decode
    step and the client's round trip): tests/data/prefill_points.yaml's published points, each within
    x1.5 and none above its measurement."""
    from pathlib import Path

    from concur.lang.yamlsafe import load_yaml

    points = load_yaml(Path(__file__).resolve().parents[1] / "data" / "prefill_points.yaml")["points"]
    assert points
    for p in points:
        given = {
            "model": p["model"],
            "gpu": p["gpu"],
            "engine": p["engine"],
            "prefill_tp": p["tp"],
            "tp": p["tp"],
            "weight_dtype": p["weight_dtype"],
            "kv_dtype": p["kv_dtype"],
            "input_tokens": f"{p['input_tokens']} token/request",
            "output_tokens": f"{p['output_tokens']} token/request",
        }
        service = solve(find=["prefill_service"], given=given, packs="llm_disagg")["prefill_service"]
        ratio = float(service.to("ms").magnitude) / p["ttft_ms"]
        assert 1 / 1.5 <= ratio <= 1.0, (p["id"], ratio)


# ---------------------------------------------------------------- a prefill pool on another GPU type


def test_without_prefill_gpu_the_prefill_pool_is_gpus_own() -> None:
    find = ["prefill_workers", "decode_workers", "prefill_service", "ttft", "cost_per_month", "prefill_kv_room"]
    plain = _values(find, arrival_rate="50 request/s", ttft_slo="2 s", itl_slo="50 ms")
    same = _values(find, arrival_rate="50 request/s", ttft_slo="2 s", itl_slo="50 ms", prefill_gpu="h100-sxm-80gb")
    assert same == pytest.approx(plain, rel=1e-12)


def test_more_prefill_flops_never_need_more_prefill_workers() -> None:
    # dense BF16 peaks: A100 312, H100 = H200 989.4, B200 2250 Tflop/s (catalogs/gpus.yaml)
    find = ["prefill_workers", "prefill_service", "decode_workers", "itl"]
    by_gpu = {
        g: _values(find, arrival_rate="50 request/s", ttft_slo="2 s", itl_slo="50 ms", prefill_gpu=g)
        for g in ("a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb", "b200")
    }
    order = [by_gpu[g] for g in ("a100-sxm-80gb", "h100-sxm-80gb", "b200")]
    assert all(a["prefill_service"] > b["prefill_service"] for a, b in itertools.pairwise(order))
    assert all(a["prefill_workers"] >= b["prefill_workers"] for a, b in itertools.pairwise(order))
    assert by_gpu["b200"]["prefill_workers"] < by_gpu["h100-sxm-80gb"]["prefill_workers"]
    # H200 has H100's FLOP/s: a compute-bound prefill pool of the same size
    assert by_gpu["h200-sxm-141gb"]["prefill_workers"] == by_gpu["h100-sxm-80gb"]["prefill_workers"]
    # the decode pool stays on gpu whatever the prefill GPU
    assert {v["decode_workers"] for v in by_gpu.values()} == {3}
    assert {round(v["itl"], 12) for v in by_gpu.values()} == {round(by_gpu["b200"]["itl"], 12)}


def test_each_pool_is_priced_at_its_own_gpu() -> None:
    find = ["prefill_gpus", "decode_gpus", "cost_per_hour"]
    v = _values(find, arrival_rate="50 request/s", prefill_gpu="b200", gpu_hour_price="2 usd/gpu/hour")
    mixed = _values(
        find,
        arrival_rate="50 request/s",
        prefill_gpu="b200",
        gpu_hour_price="2 usd/gpu/hour",
        prefill_gpu_hour_price="5 usd/gpu/hour",
    )
    per_hour = 1 / 3600  # usd/s per usd/hour
    assert v["cost_per_hour"] == pytest.approx(
        (v["prefill_gpus"] * 14.2416 + v["decode_gpus"] * 2) * per_hour, rel=1e-9
    )  # B200's aws list price
    assert mixed["cost_per_hour"] == pytest.approx(
        (mixed["prefill_gpus"] * 5 + mixed["decode_gpus"] * 2) * per_hour, rel=1e-9
    )
    same = _values(find, arrival_rate="50 request/s", gpu_hour_price="2 usd/gpu/hour")
    assert same["cost_per_hour"] == pytest.approx((same["prefill_gpus"] + same["decode_gpus"]) * 2 * per_hour)


def test_prefill_memory_and_links_are_the_prefill_gpus() -> None:
    room = {
        g: _values(["prefill_kv_room"], arrival_rate="1 request/s", prefill_gpu=g)["prefill_kv_room"]
        for g in ("h100-sxm-80gb", "h200-sxm-141gb")
    }
    # same weights and overhead: the difference is 0.9 x the memory the drivers report (GiB)
    gib = 2**30
    h100, h200 = 79.18 * gib, 139.8 * gib
    assert room["h200-sxm-141gb"] - room["h100-sxm-80gb"] == pytest.approx(0.9 * (h200 - h100), rel=2e-3)
    # an 8-GPU NVLink domain: prefill TP 16 crosses the prefill GPU's scale-out link
    pcie = _values(["prefill_comm"], arrival_rate="1 request/s", prefill_gpu="h100-pcie-80gb", prefill_tp=8)
    sxm = _values(["prefill_comm"], arrival_rate="1 request/s", prefill_gpu="h100-sxm-80gb", prefill_tp=8)
    assert pcie["prefill_comm"] > 2 * sxm["prefill_comm"]


def test_any_direction_with_a_prefill_gpu() -> None:
    # both pools given (A100 prefill, H100 decode): a rate they carry, which sizes the same pools forward
    top = _values(["arrival_rate"], prefill_gpu="a100-sxm-80gb", prefill_workers=13, decode_workers=3)["arrival_rate"]
    at = _values(["prefill_workers", "decode_workers"], prefill_gpu="a100-sxm-80gb", arrival_rate=f"{top} request/s")
    assert (at["prefill_workers"], at["decode_workers"]) == (13, 3)
    # B200 pools of 3P3D: the largest rate both carry (refused before: the rounding was inverted directly)
    both = _values(["arrival_rate"], gpu="b200", prefill_workers=3, decode_workers=3)["arrival_rate"]
    alone = [
        _values(["arrival_rate"], gpu="b200", **{p: 3})["arrival_rate"] for p in ("prefill_workers", "decode_workers")
    ]
    assert both == pytest.approx(min(alone), rel=1e-6)
    h100 = _values(["arrival_rate"], prefill_workers=3)["arrival_rate"]
    b200 = _values(["arrival_rate"], prefill_gpu="b200", prefill_workers=3)["arrival_rate"]
    assert b200 > 1.5 * h100  # 2.27x the BF16 peak, less the fixed cost per pass


def test_the_simulator_prefills_on_the_prefill_gpu() -> None:
    from concur.analysis.enginesim_disagg import solve_pools

    config = {k: v for k, v in BASE.items() if k not in ("prefill_tp", "kv_link")}
    one = {"workers": 1}
    same, _, _, _ = solve_pools(config, one, one)
    b200, dec, _, _ = solve_pools({**config, "prefill_gpu": "b200"}, one, one)
    _, plain_dec, _, _ = solve_pools(config, one, one)
    assert same.step.token_time > 2 * b200.step.token_time  # the prefill pool's step model is B200's
    assert dec.step == plain_dec.step  # the decode pool stays on gpu
    named, _, _, _ = solve_pools(config, {"workers": 1, "gpu": "b200"}, one)
    assert named.step == b200.step  # as if the pool had named the GPU itself


def test_an_unpriced_gpu_with_targets_is_refused_for_its_price() -> None:
    """MI300X has no list price: asking for the pools and the monthly cost with both SLAs must say
    so. The goal seek once took the cost (downstream of the prefill count the rate fixes) for an
    input to search, and refused with "your prefill_workers=5 contradicts ...", a count nobody gave."""
    from concur.errors import UnderdeterminedError

    asked = ["prefill_workers", "decode_workers", "fleet_gpus", "prefill_service", "ttft", "cost_per_month"]
    given = {**BASE, "gpu": "mi300x", "provider": "azure", "arrival_rate": "50 request/s"}
    given.update(ttft_slo="2 s", itl_slo="50 ms")
    with pytest.raises(UnderdeterminedError, match="mi300x has no list price at azure"):
        solve(find=asked, given=given, packs="llm_disagg")
    priced = solve(find=asked, given={**given, "gpu_hour_price": "3 usd/gpu/hour"}, packs="llm_disagg")
    alone = solve(find=["prefill_workers"], given=given, packs="llm_disagg")
    assert priced.values["prefill_workers"] == alone.values["prefill_workers"]


def test_the_plans_prefill_pool_is_the_fewest_workers_meeting_the_ttft() -> None:
    """``pick_prefill`` searches the workers by doubling then bisecting; a count by brute force agrees:
    the fewest workers at ``utilization`` whose M/D/c TTFT (:func:`prefill_ttft`) meets the target."""
    from concur.analysis.disagg_plan import Prefill, pick_prefill, prefill_ttft

    option = Prefill(tp=1, service=0.125, room=1e12, kv_bytes=1e8, transfer=0.003, weights_per_gpu=7e10, peak_time=0.05)
    first = 0.05
    for rate, slo in itertools.product((0.5, 7.0, 50.0, 400.0), (0.18, 0.2, 0.3, 2.0)):
        pick = pick_prefill([option], rate, 0.8, slo, first)
        n = max(1, -(-rate * option.service // 0.8))
        while prefill_ttft(option, rate, int(n), first) > slo * (1 + 1e-12):
            n += 1
        assert pick.workers == n, (rate, slo)
        assert pick.ttft == prefill_ttft(option, rate, pick.workers, first) <= slo * (1 + 1e-12)
    # no count meets a target the idle pool misses
    assert pick_prefill([option], 50.0, 0.8, 0.17, first).option is None
