"""The published queueing cases, run THROUGH THE PACKS (``concur.solve``), not through Python.

tests/maths/test_erlang.py checks ``concur.maths.erlang`` against tests/data/queueing_cases.yaml; this file
asks the same questions the way a user does, ``concur.solve(find=..., given=..., packs=[...])``
with the givens written in units, so a wrong equation, unit or inversion in a pack fails here.
Each case's expected entries are reproduced within the tolerance the case states (abs or rel;
rel 1e-9 where the case states none).  Entries no pack models are listed in NOT_COVERED with the
reason, as data; a test checks that every entry of the file is either run or listed, so a new
case cannot be silently ignored.

Coverage (kept honest by ``test_coverage_counts``): 17 of the file's 19 cases run through the
packs (11 of them completely), 56 of its 71 expected values.

Staffing questions (``--find servers`` against a target) must give the smallest whole number
that meets the target: ``test_staffing_is_the_smallest_meeting_the_target`` re-solves at n and
n - 1 through the pack.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from helpers import QUEUEING_CASES, assert_every_case_accounted_for, case_input, check_tolerance, covered_cases

import concur

CASES = QUEUEING_CASES

#: A connection so fast that streaming takes no time (the cases' link is not the limit):
#: 8 MB at 1e30 MB/s is 8e-30 s, far below the 1e-12 relative tolerance of the cases.
UNLIMITED = "1e30 MB/s"


_v = case_input


def _solve(packs: str, find: list[str], **given: Any) -> Any:
    return concur.solve(find=find, given=given, packs=[packs])


# --------------------------------------------------------------------------- one evaluator per case
# Each returns {expected key: value in the case's unit}, every value read from a pack solution.


def _cch(c: dict[str, Any]) -> dict[str, float]:
    """Call Centre Helper: 100 calls / 30 min, 180 s, 11 agents, 20 s target."""
    s = _solve(
        "queueing",
        ["load", "p_wait", "service_level", "mean_wait"],
        arrival_rate=f"{_v(c, 'calls_per_interval') / _v(c, 'interval')} request/s",
        service_time=f"{_v(c, 'aht')} s",
        servers=_v(c, "agents"),
        target_time=f"{_v(c, 'target_answer_time')} s",
    )
    return {
        "traffic_intensity": s.value("load", "erlang"),
        "wait_probability": s.value("p_wait"),
        "service_level_20s": s.value("service_level"),
        "asa": s.value("mean_wait", "s"),
    }


def _mitan(c: dict[str, Any]) -> dict[str, float]:
    """mitan.co.uk: 0.2 calls/s, 240 s, 55 agents; service level at 15 s and 20 s."""
    out: dict[str, float] = {}
    for t in (15, 20):
        s = _solve(
            "queueing",
            ["load", "utilization", "p_wait", "mean_wait", "service_level"],
            arrival_rate=f"{_v(c, 'arrival_rate')} request/s",
            service_time=f"{_v(c, 'aht')} s",
            servers=_v(c, "agents"),
            target_time=f"{t} s",
        )
        out[f"service_level_{t}s"] = s.value("service_level")
    out.update(
        traffic_intensity=s.value("load", "erlang"),
        occupancy=s.value("utilization"),
        wait_probability=s.value("p_wait"),
        asa=s.value("mean_wait", "s"),
    )
    return out


def _render(c: dict[str, Any]) -> dict[str, float]:
    """Render 14.3: M/M/2, 20 arrivals/h, 30 services/h; results in customers and hours."""
    s = _solve(
        "queueing",
        ["mean_in_system", "mean_in_queue", "mean_residence", "mean_wait"],
        arrival_rate=f"{_v(c, 'arrival_rate')} request/hour",
        service_time=f"{1 / _v(c, 'service_rate')} hour",
        servers=_v(c, "servers"),
    )
    return {
        "L": s.value("mean_in_system", "request"),
        "Lq": s.value("mean_in_queue", "request"),
        "W": s.value("mean_residence", "hour"),
        "Wq": s.value("mean_wait", "hour"),
    }


def _tutorsglobe(c: dict[str, Any]) -> dict[str, float]:
    """1 call/min, 3 min each: fewest agents for stability; with 5 agents, P(wait) and Wq."""
    s = _solve(
        "queueing",
        ["min_servers", "p_wait", "service_level", "mean_wait"],
        arrival_rate=f"{_v(c, 'arrival_rate')} request/min",
        service_time=f"{_v(c, 'mean_service_time')} min",
        servers=_v(c, "agents"),
        target_time="0 s",
    )
    return {
        "min_agents_for_stability": s.value("min_servers"),
        "wait_probability": s.value("p_wait"),
        "no_wait_fraction": s.value("service_level"),
        "Wq": s.value("mean_wait", "min"),
    }


def _halfin_whitt(c: dict[str, Any]) -> dict[str, float]:
    """The exact Erlang C checks of the square-root-staffing case (the asymptotics are not a pack)."""
    big = _solve("queueing", ["p_wait"], load=f"{_v(c, 'R')} erlang", servers=_v(c, "k"))
    small = _solve("queueing", ["p_wait"], load="100 erlang", servers=110)
    return {"exact_erlang_c_R10000_k10100": big.value("p_wait"), "exact_erlang_c_R100_k110": small.value("p_wait")}


def _erlang_b_table(c: dict[str, Any]) -> dict[str, float]:
    """Erlang B inverse: the largest load N circuits carry at the grade of service."""
    gos = _v(c, "grade_of_service")
    return {
        f"N{n}": _solve("queueing", ["load"], servers=n, blocking=gos).value("load", "erlang")
        for n in c["inputs"]["N"]["value"]
    }


def _mm1(c: dict[str, Any]) -> Any:
    """M/M/1 is the queueing pack with servers = 1; rates per hour."""
    return _solve(
        "queueing",
        ["utilization", "mean_in_system", "mean_residence", "mean_wait"],
        arrival_rate=f"{_v(c, 'arrival_rate')} request/hour",
        service_time=f"{1 / _v(c, 'service_rate')} hour",
        servers=1,
    )


def _bronson(c: dict[str, Any]) -> dict[str, float]:
    s = _mm1(c)
    return {"L": s.value("mean_in_system", "request"), "W": s.value("mean_residence", "hour")}


def _ikeriri(c: dict[str, Any]) -> dict[str, float]:
    s = _mm1(c)
    return {
        "utilization": s.value("utilization"),
        "Wq": s.value("mean_wait", "min"),
        "W": s.value("mean_residence", "min"),
    }


def _md1(c: dict[str, Any]) -> dict[str, float]:
    """M/D/1 by Kingman (the pack's mean_wait_gg with one server; exact here: Pollaczek-Khinchine)."""
    s = _solve(
        "queueing",
        ["mean_wait_gg", "mean_in_queue_gg"],
        utilization=_v(c, "utilization"),
        service_time=f"{_v(c, 'service_time')} s",
        servers=1,
        cs2=_v(c, "cs2"),
    )
    return {"Wq": s.value("mean_wait_gg", "s"), "Lq": s.value("mean_in_queue_gg", "request")}


def _allen_cunneen(c: dict[str, Any]) -> dict[str, float]:
    s = _solve(
        "queueing",
        ["mean_wait", "mean_wait_gg"],
        servers=_v(c, "servers"),
        arrival_rate=f"{_v(c, 'arrival_rate')} request/s",
        service_time=f"{_v(c, 'service_time')} s",
        ca2=_v(c, "ca2"),
        cs2=_v(c, "cs2"),
    )
    return {"allen_cunneen_Wq": s.value("mean_wait_gg", "s"), "mmc_Wq": s.value("mean_wait", "s")}


def _ciw(c: dict[str, Any]) -> dict[str, float]:
    s = _solve(
        "queueing",
        ["mean_wait"],
        arrival_rate=f"{_v(c, 'arrival_rate')} request/s",
        service_time=f"{1 / _v(c, 'service_rate')} s",
        servers=1,
    )
    return {"analytic_Wq": s.value("mean_wait", "s")}


def _sundar(c: dict[str, Any]) -> dict[str, float]:
    """Little's law sizing: 5000 request/s at 80 ms, 50 per instance, 70 % utilization."""
    s = _solve(
        "littles_law",
        ["in_flight", "replica_rate", "replicas_exact", "replicas"],
        arrival_rate=f"{_v(c, 'arrival_rate')} request/s",
        residence_time=f"{_v(c, 'W')} s",
        per_replica_concurrency=f"{_v(c, 'concurrency_per_instance')} request/replica",
        utilization=_v(c, "target_utilization"),
    )
    return {
        "L": s.value("in_flight", "request"),
        "per_instance_throughput": s.value("replica_rate", "request/s/replica"),
        "instances_exact": s.value("replicas_exact", "replica"),
        "instances": s.value("replicas"),
    }


def _baseten(c: dict[str, Any]) -> dict[str, float]:
    """The decode floor is llm_throughput's memory_time with no KV read (the post's model);
    the prefill is its prefill_time at full efficiency, counting the weights' FLOPs only as the
    post does (no attention FLOPs)."""
    base = {
        "params": f"{_v(c, 'params')} parameter",
        "weight_bytes": f"{_v(c, 'bytes_per_param')} B/parameter",
        "concurrency": "1 request",
        "input_tokens": f"{_v(c, 'prompt_tokens')} token/request",
        "output_tokens": "0 token/request",
        "kv_per_token": "0 B/token",
    }
    out = {}
    for gpu in ("T4", "A10", "A100"):
        s = _solve("llm_throughput", ["memory_time"], **base, hbm_bandwidth=f"{_v(c, 'bw_' + gpu)} B/s")
        out[f"tpot_{gpu}"] = s.value("memory_time", "ms")
    flops = f"{_v(c, 'flops_A10_fp16')} flop/s"
    s = _solve(
        "llm_throughput",
        ["prefill_time"],
        **base,
        peak_flops_bf16=flops,
        peak_flops_fp8=flops,
        efficiency_prefill=1,
        prefill_attention_flops="0 flop",
    )
    out["prefill_A10"] = s.value("prefill_time", "ms")
    return out


def _kv_cost(c: dict[str, Any]) -> dict[str, float]:
    """KV bytes per token from llm_memory (MHA: kv_heads = heads, head_dim = d_model / heads);
    the per-sequence step cost k is what one more sequence adds to llm_throughput's memory_time."""
    heads = 32
    arch = {
        "layers": int(_v(c, "n_layers")),
        "kv_heads": heads,
        "head_dim": int(_v(c, "d_model")) // heads,
        "kv_bytes": f"{_v(c, 'bytes_per_elem')} B/token",
    }
    kv = _solve("llm_memory", ["kv_per_token"], **arch).value("kv_per_token", "B/token")
    step = {
        **arch,
        "params": "1e9 parameter",
        "input_tokens": f"{_v(c, 'context')} token/request",
        "output_tokens": "0 token/request",
        "hbm_bandwidth": f"{_v(c, 'bw')} B/s",
    }
    t1, t2 = (
        _solve("llm_throughput", ["memory_time"], **step, concurrency=f"{n} request").value("memory_time", "ms")
        for n in (1, 2)
    )
    return {"kv_bytes_per_token": kv, "k_per_sequence": t2 - t1}


def _s3(c: dict[str, Any]) -> dict[str, float]:
    """Connections to fill a 10 Gb/s NIC: data_loader's in_flight with no first-byte wait."""
    nic = f"{_v(c, 'nic')} bit/s"
    runs = {}
    for rate in c["inputs"]["per_connection"]["value"]:
        s = _solve(
            "data_loader", ["in_flight"], throughput=nic, conn_bandwidth=f"{rate} B/s", ttfb="0 s", request_size="8 MB"
        )
        runs[round(rate / 1e6)] = s.value("in_flight", "request")
    return {
        "nic_bytes": s.value("throughput", "B/s"),
        "connections_at_85": runs[85],
        "connections_at_90": runs[90],
        "connections_doc": runs[85],
    }


def _bdp(c: dict[str, Any]) -> dict[str, float]:
    """The bandwidth-delay product is data_loader's knee_size of the whole path; 8 MB ranges in
    flight to fill it come from in_flight with the connection itself unlimited."""
    rate, ttfb = f"{_v(c, 'rate')} bit/s", f"{_v(c, 'latency')} s"
    knee = _solve("data_loader", ["knee_size"], conn_bandwidth=rate, ttfb=ttfb)
    ranges = _solve(
        "data_loader", ["in_flight"], throughput=rate, ttfb=ttfb, request_size="8 MB", conn_bandwidth=UNLIMITED
    )
    return {"bdp": knee.value("knee_size", "B"), "ranges_8MB_in_flight": ranges.value("in_flight", "request")}


def _loader(c: dict[str, Any]) -> dict[str, float]:
    """Eight blocking workers, 100 kB samples at 50 ms: GETs in flight = workers, not prefetch."""
    common = {"request_size": f"{_v(c, 'sample_size')} B", "ttfb": f"{_v(c, 't0')} s", "conn_bandwidth": UNLIMITED}
    s = _solve(
        "data_loader",
        ["prefetched_batches", "request_rate", "throughput"],
        **common,
        workers=int(_v(c, "num_workers")),
        concurrency_per_worker="1 request",
        prefetch_factor=_v(c, "prefetch_factor"),
    )
    target = _solve("data_loader", ["in_flight"], **common, request_rate=f"{_v(c, 'target_samples')} request/s")
    return {
        "max_prefetched_batches": s.value("prefetched_batches"),
        "samples_per_s": s.value("request_rate", "request/s"),
        "bytes_per_s": s.value("throughput", "B/s"),
        "concurrent_requests_for_target": target.value("in_flight", "request"),
    }


EVALUATORS: dict[str, Callable[[dict[str, Any]], dict[str, float]]] = {
    "erlangc-cch-A10-N11": _cch,
    "erlangc-mitan-A48-N55": _mitan,
    "mmc-render-14-3": _render,
    "mmc-tutorsglobe-callcenter": _tutorsglobe,
    "halfin-whitt-sqrt-staffing": _halfin_whitt,
    "erlangb-capacity-1pct": _erlang_b_table,
    "mm1-bronson-23-3": _bronson,
    "mm1-ikeriri": _ikeriri,
    "md1-pk-rho0.9": _md1,
    "allen-cunneen-md3": _allen_cunneen,
    "des-ciw-doc-mm1": _ciw,
    "little-replicas-sundar": _sundar,
    "llm-baseten-decode-floor": _baseten,
    "llm-kv-cost-per-seq": _kv_cost,
    "s3-connections-10g": _s3,
    "objstore-bdp": _bdp,
    "dataloader-inflight": _loader,
}

#: What the packs do not model, and why (whole cases, or single ``case/key`` entries).
NOT_COVERED: dict[str, str] = {
    "mmc-render-14-3/p0": "P(empty) of M/M/c needs the Poisson partial sum sum(A^k/k!), which the "
    "expression language has no function for; concur.maths.erlang.mmc computes it",
    "mm1-bronson-23-3/p0": "P(empty) is not a pack variable (see mmc-render-14-3/p0); for one server "
    "it is 1 - utilization, which the pack does give",
    "halfin-whitt-sqrt-staffing/hw_wait_probability_c1": "Halfin-Whitt asymptotics need the normal "
    "CDF, not in the expression language; concur.maths.erlang covers them",
    "halfin-whitt-sqrt-staffing/c_for_alpha_0.2": "Halfin-Whitt asymptotics: see hw_wait_probability_c1",
    "halfin-whitt-sqrt-staffing/c_for_alpha_0.1": "Halfin-Whitt asymptotics: see hw_wait_probability_c1",
    "md1-pk-rho0.9/sim_Wq_reference": "a simulation estimate, not a formula: tests/cli/test_simulate.py",
    "allen-cunneen-md3/sim_Wq_reference": "a simulation estimate, not a formula: tests/cli/test_simulate.py",
    "des-ciw-doc-mm1/mean_wait": "one Ciw run's sample mean (its own seeds); no pack simulates",
    "llm-h100-ops-per-byte": "the ridge point is peak_flops / hbm_bandwidth, one division that no pack "
    "names (llm_throughput's max(memory_time, compute_time) crosses there)",
    "des-whitt-asymptotic-variance": "simulation run-length planning (Whitt 1989), not a capacity "
    "model: concur.maths.erlang.mm1_run_length, tests/maths/test_erlang.py",
}


@functools.cache
def _evaluate(case_id: str) -> dict[str, float]:
    return EVALUATORS[case_id](CASES[case_id])


@pytest.mark.parametrize(("case_id", "key"), covered_cases(EVALUATORS, NOT_COVERED), ids=lambda x: x)
def test_published_case_through_packs(case_id: str, key: str) -> None:
    got = _evaluate(case_id)
    assert key in got, f"{case_id}: the evaluator does not produce {key}"
    check_tolerance(got[key], CASES[case_id]["expected"][key])


def test_every_case_is_run_or_listed() -> None:
    assert_every_case_accounted_for(_evaluate, EVALUATORS, NOT_COVERED)


def test_coverage_counts() -> None:
    values = sum(len(c["expected"]) for c in CASES.values())
    complete = [cid for cid in EVALUATORS if not any(k.startswith(f"{cid}/") for k in NOT_COVERED)]
    covered = covered_cases(EVALUATORS, NOT_COVERED)
    summary = (
        f"{len(EVALUATORS)} of {len(CASES)} cases covered through the packs "
        f"({len(complete)} completely), {len(covered)} of {values} expected values"
    )
    print(summary)
    assert (len(EVALUATORS), len(CASES), len(complete), len(covered), values) == (17, 19, 11, 56, 71), summary


# --------------------------------------------------------------------------- staffing: the smallest n


def _meets(name: str, value: float, target: float) -> bool:
    limit = concur.load_model(["queueing"]).variable(name).limit
    return value >= target if limit == "at_least" else value <= target


STAFFING = [
    pytest.param(
        "erlangc-cch-A10-N11", "service_level", 0.8, {"target_time": "20 s"}, 14, id="cch-service-level-80pct-in-20s"
    ),
    pytest.param("erlangc-cch-A10-N11", "p_wait", 0.2, {}, 14, id="cch-p-wait-20pct"),
    pytest.param("erlangc-cch-A10-N11", "mean_wait", 20.0, {}, 13, id="cch-mean-wait-20s"),
    pytest.param(
        "erlangc-mitan-A48-N55",
        "service_level",
        0.8,
        {"target_time": "15 s"},
        55,
        id="mitan-service-level-80pct-in-15s",
    ),
    pytest.param("erlangc-mitan-A48-N55", "blocking", 0.01, {}, 62, id="mitan-erlang-b-1pct"),
]


@pytest.mark.parametrize(("case_id", "target_name", "target", "extra", "want"), STAFFING)
def test_staffing_is_the_smallest_meeting_the_target(
    case_id: str, target_name: str, target: float, extra: dict[str, str], want: int
) -> None:
    c = CASES[case_id]
    rate = _v(c, "arrival_rate")
    given = {"arrival_rate": f"{rate} request/s", "service_time": f"{_v(c, 'aht')} s", **extra}
    unit = "s" if target_name == "mean_wait" else None
    target_text = f"{target} s" if unit else target
    servers = _solve("queueing", ["servers"], **given, **{target_name: target_text}).value("servers")
    assert servers == want

    def at(n: float) -> float:
        return _solve("queueing", [target_name], **given, servers=n).value(target_name, unit)

    assert _meets(target_name, at(servers), target)
    # one server fewer misses the target, or leaves a queue that never drains (load >= servers)
    if target_name == "blocking" or servers - 1 > rate * _v(c, "aht"):
        assert not _meets(target_name, at(servers - 1), target)
