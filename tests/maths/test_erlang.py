"""concur.maths.erlang against published worked examples (tests/data/queueing_cases.yaml) and
against its own defining identities.

Each case's expected numbers are reproduced within the tolerance the case states.  Cases
(or single expected entries) outside erlang.py's models are listed in OUT_OF_SCOPE with the
place that covers them, and a test checks that every entry of the file is accounted for.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import QUEUEING_CASES, assert_every_case_accounted_for, case_input, check_tolerance, covered_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from concur.errors import UsageError
from concur.maths import erlang

CASES = QUEUEING_CASES
_v = case_input


def _cch(c: dict) -> dict[str, float]:
    q = erlang.mmc(_v(c, "arrival_rate"), _v(c, "aht"), _v(c, "agents"))
    return {
        "traffic_intensity": q.load,
        "wait_probability": q.p_wait,
        "service_level_20s": q.service_level(20),
        "asa": q.mean_wait,
    }


def _mitan(c: dict) -> dict[str, float]:
    q = erlang.mmc(_v(c, "arrival_rate"), _v(c, "aht"), _v(c, "agents"))
    return {
        "traffic_intensity": q.load,
        "occupancy": q.utilization,
        "wait_probability": q.p_wait,
        "asa": q.mean_wait,
        "service_level_15s": q.service_level(15),
        "service_level_20s": q.service_level(20),
    }


def _render(c: dict) -> dict[str, float]:  # rates per hour, times in hours
    q = erlang.mmc(_v(c, "arrival_rate"), 1 / _v(c, "service_rate"), _v(c, "servers"))
    return {"p0": q.p0, "L": q.mean_in_system, "Lq": q.mean_in_queue, "W": q.mean_residence, "Wq": q.mean_wait}


def _tutorsglobe(c: dict) -> dict[str, float]:  # minutes
    lam, s = _v(c, "arrival_rate"), _v(c, "mean_service_time")
    q = erlang.mmc(lam, s, _v(c, "agents"))
    return {
        "min_agents_for_stability": erlang.min_stable_servers(lam * s),
        "wait_probability": q.p_wait,
        "no_wait_fraction": q.service_level(0),
        "Wq": q.mean_wait,
    }


def _halfin_whitt(c: dict) -> dict[str, float]:
    r, k = _v(c, "R"), _v(c, "k")
    return {
        "hw_wait_probability_c1": erlang.halfin_whitt_p_wait(_v(c, "c")),
        "c_for_alpha_0.2": erlang.halfin_whitt_beta(0.2),
        "c_for_alpha_0.1": erlang.halfin_whitt_beta(0.1),
        "exact_erlang_c_R10000_k10100": erlang.erlang_c(k, r),
        "exact_erlang_c_R100_k110": erlang.erlang_c(110, 100),
    }


def _erlang_b_table(c: dict) -> dict[str, float]:
    gos = _v(c, "grade_of_service")
    return {f"N{n}": erlang.load_for_blocking(n, gos) for n in c["inputs"]["N"]["value"]}


def _mm1(c: dict) -> dict[str, float]:  # per hour; results in hours and minutes
    q = erlang.mm1(_v(c, "arrival_rate"), 1 / _v(c, "service_rate"))
    return {
        "L": q.mean_in_system,
        "W": q.mean_residence,
        "p0": q.p0,
        "utilization": q.utilization,
        "Wq_min": q.mean_wait * 60,
        "W_min": q.mean_residence * 60,
    }


def _bronson(c: dict) -> dict[str, float]:
    return {k: v for k, v in _mm1(c).items() if k in ("L", "W", "p0")}


def _ikeriri(c: dict) -> dict[str, float]:
    m = _mm1(c)
    return {"utilization": m["utilization"], "Wq": m["Wq_min"], "W": m["W_min"]}


def _md1(c: dict) -> dict[str, float]:
    rho, s = _v(c, "utilization"), _v(c, "service_time")
    wq = erlang.kingman_wait(rho, s, 1.0, _v(c, "cs2"))
    return {"Wq": wq, "Lq": (rho / s) * wq}


def _allen_cunneen(c: dict) -> dict[str, float]:
    args = (_v(c, "servers"), _v(c, "arrival_rate"), _v(c, "service_time"))
    return {
        "allen_cunneen_Wq": erlang.allen_cunneen_wait(*args, _v(c, "ca2"), _v(c, "cs2")),
        "mmc_Wq": erlang.mmc(args[1], args[2], args[0]).mean_wait,
        # the simulated M/D/3 wait, within its statistical tolerance: Cosmetatos's M/D/c approximation
        "sim_Wq_reference": erlang.md_c_wait(args[0], args[1] * args[2], args[2]),
    }


def _ciw(c: dict) -> dict[str, float]:
    return {"analytic_Wq": erlang.mm1(_v(c, "arrival_rate"), 1 / _v(c, "service_rate")).mean_wait}


def _whitt(c: dict) -> dict[str, float]:
    eps, z = _v(c, "eps"), _v(c, "z")
    out = {f"sigma2_rho{r}": erlang.mm1_number_variance(r) for r in c["inputs"]["rho"]["value"]}
    out.update({f"T_rho{r}_eps1pct": erlang.mm1_run_length(r, eps, z) for r in (0.5, 0.9)})
    return out


EVALUATORS: dict[str, Callable[[dict], dict[str, float]]] = {
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
    "des-whitt-asymptotic-variance": _whitt,
}

# Entries erlang.py does not model, and where they are covered instead.
OUT_OF_SCOPE = {
    "md1-pk-rho0.9/sim_Wq_reference": "simulation estimate: tests/cli/test_simulate.py (M/D/1)",
    "des-ciw-doc-mm1/mean_wait": "one Ciw run's sample mean; our simulator has its own seeds",
    "little-replicas-sundar": "Little's law: tests/formulas/test_littles_law_points.py",
    "llm-baseten-decode-floor": "roofline (topic T2, llm_throughput pack)",
    "llm-h100-ops-per-byte": "roofline (topic T2)",
    "llm-kv-cost-per-seq": "KV bytes (topics T1/T2)",
    "s3-connections-10g": "one division (NIC rate / per-connection rate); no model to test",
    "objstore-bdp": "object storage: tests/formulas/test_littles_law_points.py",
    "dataloader-inflight": "data loader: tests/formulas/test_littles_law_points.py",
}


@pytest.mark.parametrize(("case_id", "key"), covered_cases(EVALUATORS, OUT_OF_SCOPE), ids=lambda x: x)
def test_published_case(case_id: str, key: str) -> None:
    got = EVALUATORS[case_id](CASES[case_id])
    check_tolerance(got[key], CASES[case_id]["expected"][key])


def test_every_case_is_accounted_for() -> None:
    assert_every_case_accounted_for(lambda cid: EVALUATORS[cid](CASES[cid]), EVALUATORS, OUT_OF_SCOPE)


def test_md_c_wait_is_cosmetatos_and_the_exact_md1_wait_at_one_server() -> None:
    """The M/D/3 case's simulated wait (2.336 +- 0.02) is met by Cosmetatos's correction (2.331) and
    missed by half the M/M/3 wait alone (2.222); at one server the approximation is the exact M/D/1
    (Pollaczek-Khinchine) wait; no load waits nothing and a saturated queue never drains."""
    case = CASES["allen-cunneen-md3"]
    c, lam, s = _v(case, "servers"), _v(case, "arrival_rate"), _v(case, "service_time")
    ref = case["expected"]["sim_Wq_reference"]
    check_tolerance(erlang.md_c_wait(c, lam * s, s), ref)
    with pytest.raises(AssertionError):
        check_tolerance(erlang.mmc(lam, s, c).mean_wait / 2, ref)
    for rho in (0.05, 0.5, 0.78, 0.9, 0.999):
        assert erlang.md_c_wait(1, rho, 2.0) == pytest.approx(rho * 2.0 / (2 * (1 - rho)), rel=1e-12)
    assert erlang.md_c_wait(8, 0.0, 1.0) == 0.0
    assert erlang.md_c_wait(8, 8.0, 1.0) == math.inf
    # more servers at one load never wait longer
    waits = [erlang.md_c_wait(n, 6.24, 1.0) for n in range(7, 20)]
    assert all(b < a for a, b in itertools.pairwise(waits))
    with pytest.raises(UsageError):
        erlang.md_c_wait(0, 1.0, 1.0)


# --------------------------------------------------------------------------- the issue numbers


def test_staffing_for_service_level_is_fourteen() -> None:
    assert erlang.servers_for_service_level(10, 180, 20, 0.8) == 14
    assert erlang.mmc(100 / 1800, 180, 13).service_level(20) < 0.8


def test_inverse_searches_agree_with_forward_functions() -> None:
    for load in (0.3, 4.0, 10.0, 97.5, 480.0):
        c = erlang.servers_for_p_wait(load, 0.2)
        assert erlang.erlang_c(c, load) <= 0.2 < erlang.erlang_c(c - 1, load) or c == 1
        c = erlang.servers_for_blocking(load, 0.01)
        assert erlang.erlang_b(c, load) <= 0.01 < erlang.erlang_b(c - 1, load)
        c = erlang.servers_for_mean_wait(load, 2.0, 0.1)
        assert erlang.mmc(load / 2.0, 2.0, c).mean_wait <= 0.1
        assert c - 1 <= load or erlang.mmc(load / 2.0, 2.0, c - 1).mean_wait > 0.1


# --------------------------------------------------------------------------- identities


def _erlang_b_textbook(c: int, a: float) -> float:
    terms = [a**k / math.factorial(k) for k in range(c + 1)]
    return terms[-1] / sum(terms)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 60), st.floats(0.0, 80.0))
def test_recurrence_matches_textbook_formula(c: int, a: float) -> None:
    assert erlang.erlang_b(c, a) == pytest.approx(_erlang_b_textbook(c, a), rel=1e-10, abs=1e-300)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200), st.floats(0.0, 300.0))
def test_erlang_c_is_a_probability_above_b(c: int, a: float) -> None:
    b, pc = erlang.erlang_b(c, a), erlang.erlang_c(c, a)
    assert 0.0 <= b <= pc <= 1.0
    if a >= c:
        assert pc == 1.0


@settings(max_examples=100, deadline=None)
@given(st.floats(0.5, 50.0), st.floats(0.0, 0.999))
def test_noninteger_servers_interpolate_monotonically(c: float, frac: float) -> None:
    a = 7.0
    lo, hi = erlang.erlang_b(math.floor(c), a), erlang.erlang_b(math.floor(c) + 1, a)
    mid = erlang.erlang_b(math.floor(c) + frac, a)
    assert hi <= mid <= lo


def test_large_server_counts_do_not_overflow() -> None:
    b = erlang.erlang_b(20_000, 19_500.0)
    assert 0 < b < 1
    assert erlang.erlang_c(10_100, 10_000) == pytest.approx(0.2248, abs=5e-5)


def test_saturated_queue_reports_infinite_waits() -> None:
    q = erlang.mmc(arrival_rate=1.0, service_time=3.0, servers=3)
    assert not q.stable
    assert q.p_wait == 1.0
    assert q.mean_wait == q.mean_in_queue == q.mean_in_system == math.inf
    assert q.service_level(10) == 0.0
    assert erlang.kingman_wait(1.0, 1.0, 1.0, 1.0) == math.inf


def test_mmc_littles_law_holds() -> None:
    q = erlang.mmc(0.2, 240, 55)
    assert q.mean_in_system == pytest.approx(q.arrival_rate * q.mean_residence, rel=1e-12)
    assert q.mean_in_queue == pytest.approx(q.arrival_rate * q.mean_wait, rel=1e-12)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: erlang.erlang_b(-1, 2), "servers"),
        (lambda: erlang.erlang_c(3, -0.5), "load"),
        (lambda: erlang.erlang_c(float("nan"), 1), "servers"),
        (lambda: erlang.mmc(1, 0, 2), "service_time"),
        (lambda: erlang.servers_for_p_wait(5, 1.5), "target"),
        (lambda: erlang.erlang_b("ten", 1), "servers"),
    ],
    ids=["negative-servers", "negative-load", "nan-servers", "zero-service", "bad-target", "not-a-number"],
)
def test_invalid_arguments_raise_usage_error(call: Callable[[], object], name: str) -> None:
    with pytest.raises(UsageError) as info:
        call()
    assert isinstance(info.value, ValueError)
    assert info.value.variable == name
    assert name in str(info.value)


def test_array_variants_match_scalars() -> None:
    np = pytest.importorskip("numpy")
    cs = np.array([[1, 5, 11, 14, 40]])
    loads = np.array([[0.5], [10.0], [38.0]])
    got_b = erlang.erlang_b_array(cs, loads)
    got_c = erlang.erlang_c_array(cs, loads)
    for i, a in enumerate(loads[:, 0]):
        for j, c in enumerate(cs[0]):
            assert got_b[i, j] == pytest.approx(erlang.erlang_b(int(c), float(a)), rel=1e-12)
            assert got_c[i, j] == pytest.approx(erlang.erlang_c(int(c), float(a)), rel=1e-12)
    assert erlang.erlang_b_array([2.25], [3.0])[0] == pytest.approx(erlang.erlang_b(2.25, 3.0))
    with pytest.raises(UsageError):
        erlang.erlang_b_array([-1.0], [1.0])


def test_import_does_not_load_numpy() -> None:
    import subprocess
    import sys

    code = "import sys, concur.maths.erlang; print('numpy' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "engine")},
    )
    assert out.stdout.strip() == "False"
