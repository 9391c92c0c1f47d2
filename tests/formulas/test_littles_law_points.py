"""Little's law against published serving measurements and worked examples.

For the closed-loop NIM point and the MLPerf Server points of throughput_points.yaml:
concurrency = rate × latency (through ``concur.solve`` and the littles_law pack) and
throughput = concurrency × osl / (ttft + (osl − 1)·itl) must reproduce the published
figures within 3 %.  The Little's-law and object-storage cases of queueing_cases.yaml run
through the littles_law and data_loader packs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

import concur

DATA = Path(__file__).resolve().parents[1] / "data"
POINTS = {p["id"]: p for p in YAML(typ="safe").load((DATA / "throughput_points.yaml").read_text())["points"]}
CASES = {c["id"]: c for c in YAML(typ="safe").load((DATA / "queueing_cases.yaml").read_text())["cases"]}
MLPERF = sorted(k for k in POINTS if k.startswith("mlperf") and k.endswith("-server"))
NIM = sorted(k for k in POINTS if k.startswith("nim"))


def _in_flight(rate: float, latency: float) -> float:
    given = {"arrival_rate": f"{rate} request/s", "residence_time": f"{latency} s"}
    sol = concur.solve(find="in_flight", packs="littles_law", given=given)
    return sol.value("in_flight")


def _throughput(concurrency: float, osl: float, ttft: float, itl: float) -> float:
    """Output token/s of ``concurrency`` requests each living ttft + (osl − 1)·itl."""
    return concurrency * osl / (ttft + (osl - 1) * itl)


def test_points_are_present() -> None:
    assert len(MLPERF) >= 2 and len(NIM) >= 1


@pytest.mark.parametrize("pid", MLPERF)
def test_mlperf_server_point(pid: str) -> None:
    m = POINTS[pid]["measured"]
    rate, latency = m["completed_samples_s"], m["mean_latency_s"]
    tokens_per_s = m["output_tok_s_aggregate"]
    osl = tokens_per_s / rate  # mean output length, as the point's own note derives it
    concurrency = _in_flight(rate, latency)
    assert concurrency == pytest.approx(rate * latency, rel=1e-9)
    derived = POINTS[pid]["derived_not_measured"]["littles_law_inflight_requests"]
    assert concurrency == pytest.approx(derived, rel=0.03)
    got = _throughput(concurrency, osl, m["ttft_ms_mean"] / 1e3, m["tpot_ms_mean"] / 1e3)
    assert got == pytest.approx(tokens_per_s, rel=0.03)


@pytest.mark.parametrize("pid", NIM)
def test_nim_closed_loop_point(pid: str) -> None:
    p = POINTS[pid]
    m = p["measured"]
    ttft, itl, osl = m["ttft_ms"] / 1e3, m["itl_ms"] / 1e3, float(p["osl"])
    latency = ttft + (osl - 1) * itl
    got = _throughput(float(p["concurrency"]), osl, ttft, itl)
    assert got == pytest.approx(m["output_tok_s_aggregate"], rel=0.03)
    # closed loop: the request rate Little's law implies brings back the concurrency
    rate = got / osl
    assert _in_flight(rate, latency) == pytest.approx(p["concurrency"], rel=1e-9)


def test_sundar_replicas_case() -> None:
    c = CASES["little-replicas-sundar"]
    i, e = c["inputs"], c["expected"]
    sol = concur.solve(
        find=["in_flight", "replicas"],
        packs="littles_law",
        given={
            "arrival_rate": f"{i['arrival_rate']['value']} request/s",
            "residence_time": f"{i['W']['value']} s",
            "per_replica_concurrency": f"{i['concurrency_per_instance']['value']} request/replica",
            "utilization": i["target_utilization"]["value"],
        },
    )
    assert sol.value("in_flight") == pytest.approx(e["L"]["value"], rel=1e-12)
    assert sol.value("replicas") == e["instances"]["value"]


def _loader(find: list[str], **given: str) -> Any:
    return concur.solve(find=find, packs="data_loader", given=given)


def test_dataloader_inflight_case() -> None:
    e = CASES["dataloader-inflight"]["expected"]
    unlimited = "1e12 MB/s"  # the case's link and connection are not the limit
    sol = _loader(
        ["in_flight", "throughput"],
        workers="8",
        concurrency_per_worker="1 request",
        request_size="0.1 MB",
        ttfb="50 ms",
        conn_bandwidth=unlimited,
    )
    assert sol.value("in_flight") == 8
    assert sol.value("throughput") * 1e6 == pytest.approx(e["bytes_per_s"]["value"], rel=1e-9)
    sol = _loader(["in_flight"], throughput="500 MB/s", request_size="0.1 MB", ttfb="50 ms", conn_bandwidth=unlimited)
    assert sol.value("in_flight") == pytest.approx(e["concurrent_requests_for_target"]["value"], rel=1e-9)


def test_objstore_bandwidth_delay_product() -> None:
    e = CASES["objstore-bdp"]["expected"]
    sol = _loader(["knee_size"], conn_bandwidth="1250 MB/s", ttfb="50 ms")
    bdp = sol.value("knee_size") * 1e6
    assert bdp == pytest.approx(e["bdp"]["value"], rel=1e-12)
    assert bdp / 8e6 == pytest.approx(e["ranges_8MB_in_flight"]["value"], rel=1e-12)
