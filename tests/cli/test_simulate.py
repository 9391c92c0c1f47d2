"""The discrete-event simulator against the analytic answers it must reproduce.

Runs are seeded, so every assertion is deterministic; the checks use the simulator's own
95 % batch-means interval, so a biased simulator (or a wrong analytic formula) fails.
The whole file takes a few seconds on two cores.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from concur.analysis.simulate import LLMFleet, MMcQueue, fixed_point, plot_timeseries, simulate
from concur.errors import UsageError
from concur.maths import erlang

FLEET = dict(replicas=10, output_tokens=400, ttft=0.5, step_time_base=0.02, step_time_per_seq=0.0005, max_batch=256)


@pytest.mark.parametrize(
    ("rate", "service_time", "servers", "duration"),
    [(100 / 1800, 180.0, 14, 300_000.0), (0.5, 1.0, 1, 40_000.0), (3.0, 1.0, 5, 20_000.0)],
    ids=["call-centre-14-agents", "mm1-rho0.5", "mm5-rho0.6"],
)
def test_mmc_agrees_with_erlang_c(rate: float, service_time: float, servers: int, duration: float) -> None:
    res = simulate(MMcQueue(rate, service_time, servers), duration, seed=7)
    q = erlang.mmc(rate, service_time, servers)
    assert res.p_wait.contains(q.p_wait)
    assert res.wait.contains(q.mean_wait)
    assert res.in_queue.contains(q.mean_in_queue)
    assert res.in_flight.contains(q.load)
    assert res.latency.contains(q.mean_residence)
    assert res.unfinished == 0


def test_md1_matches_pollaczek_khinchine() -> None:
    # queueing_cases.yaml md1-pk-rho0.9: Wq = 4.5 exactly, simulated reference 4.489
    res = simulate(MMcQueue(0.9, 1.0, 1, "deterministic"), 200_000.0, seed=1)
    assert res.wait.contains(4.5)
    assert res.wait.contains(4.489)


def test_md3_sits_above_allen_cunneen() -> None:
    # queueing_cases.yaml allen-cunneen-md3: approximation 2.222, simulated reference 2.336
    res = simulate(MMcQueue(0.2, 10.0, 3, "deterministic"), 400_000.0, seed=3)
    assert res.wait.contains(2.336)
    approx = erlang.allen_cunneen_wait(3, 0.2, 10.0, 1.0, 0.0)
    assert approx < res.wait.mean


# The fixed point is mean-field: it puts the *mean* batch into t_step.  Batch sizes
# fluctuate, and tokens are produced more slowly while the batch is large, so the
# simulated mean sits slightly above it (+0.4 % at rho = 0.4 over 30 seeds: 284.5 ± 0.6
# against 283.3).  MEAN_FIELD allows for that; everything else must fit the 95 % CI.
MEAN_FIELD = 0.01


@pytest.mark.parametrize(
    ("rate", "duration", "warmup"),
    [(20.0, 1500.0, None), (30.0, 2000.0, None), (40.0, 4000.0, 1000.0)],
    ids=["rate20", "rate30", "rate40"],
)
def test_llm_fleet_agrees_with_littles_law_fixed_point(rate: float, duration: float, warmup: float | None) -> None:
    fleet = LLMFleet(rate, **FLEET)
    fp = fixed_point(fleet)
    res = simulate(fleet, duration, seed=2, warmup=warmup, batches=10)
    assert rate / fleet.saturation_rate < 0.95  # 40/s: 170 per replica in flight, under the cap of 256
    assert res.in_flight.contains(fp["in_flight"], slack=MEAN_FIELD * fp["in_flight"])
    assert res.latency.contains(fp["residence_time"], slack=MEAN_FIELD * fp["residence_time"])
    assert res.in_queue.mean == 0.0  # the cap of 256 per replica is never reached
    # Little's law inside the simulation: L = throughput × W
    assert res.in_flight.mean == pytest.approx(res.throughput * res.latency.mean, rel=0.03)


def test_fixed_point_closed_form() -> None:
    fp = fixed_point(LLMFleet(30.0, **FLEET))
    assert fp["in_flight"] == pytest.approx(637.5)
    assert fp["residence_time"] == pytest.approx(21.25)
    # the batch cap binds first: 10 replicas x 256 over the time one request holds a slot at t_step(256)
    assert fp["saturation_rate"] == pytest.approx(10 * 256 / (0.5 + 400 * (0.02 + 0.0005 * 256)))
    assert math.isinf(fixed_point(LLMFleet(43.0, **FLEET))["in_flight"])
    assert math.isfinite(fixed_point(LLMFleet(42.8, **FLEET))["in_flight"])


def test_fleet_at_saturation_never_drains() -> None:
    hot = simulate(LLMFleet(50.0, **FLEET), 600.0, seed=1)
    cool = simulate(LLMFleet(30.0, **FLEET), 600.0, seed=1)
    # at the cap t_step = 0.148 s, so the fleet serves 10·256/(0.5 + 400·0.148) = 42.9/s
    capped = 10 * 256 / (0.5 + 400 * (0.02 + 0.0005 * 256))
    assert hot.queue_growth == pytest.approx(50.0 - capped, rel=0.15)
    assert hot.series_queue[-1] > 2000
    assert hot.in_flight.mean == pytest.approx(2560, rel=0.02)
    assert cool.queue_growth == 0.0 and max(cool.series_queue) == 0


def test_mmc_at_full_load_grows() -> None:
    res = simulate(MMcQueue(1.05, 1.0, 1), 20_000.0, seed=4)
    assert res.queue_growth > 0.02
    assert res.series_queue[-1] > 500


def test_runs_are_deterministic_for_a_seed() -> None:
    a = simulate(LLMFleet(25.0, **FLEET), 200.0, seed=11)
    b = simulate(LLMFleet(25.0, **FLEET), 200.0, seed=11)
    c = simulate(LLMFleet(25.0, **FLEET), 200.0, seed=12)
    assert a.as_dict() == b.as_dict() and a.series_in_flight == b.series_in_flight
    assert a.latency.mean != c.latency.mean


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: LLMFleet(-1.0, **FLEET), "arrival_rate"),
        (lambda: LLMFleet(1.0, **{**FLEET, "replicas": 0}), "replicas"),
        (lambda: LLMFleet(1.0, **{**FLEET, "max_batch": 2.5}), "max_batch"),
        (lambda: MMcQueue(1.0, float("inf"), 2), "service_time"),
        (lambda: simulate(MMcQueue(1.0, 0.5, 1), 10.0, warmup=20.0), "warmup"),
        (lambda: simulate(MMcQueue(1.0, 0.5, 1), 10.0, batches=1), "batches"),
    ],
    ids=["negative-rate", "zero-replicas", "fractional-batch", "infinite-service", "long-warmup", "one-batch"],
)
def test_bad_arguments_raise_usage_error(make, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError) as info:
        make()
    assert info.value.variable == name


def test_plot_writes_a_png(tmp_path: Path) -> None:
    res = simulate(LLMFleet(50.0, **FLEET), 120.0, seed=1)
    out = plot_timeseries(res, tmp_path / "queue.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob("*.part"))


def test_cli_json_and_table(tmp_path: Path) -> None:
    from concur.cli.commands.simulate import command

    runner = CliRunner()
    args = [
        "--rate",
        "30",
        "--replicas",
        "10",
        "--osl",
        "400",
        "--ttft",
        "0.5",
        "--step-base",
        "0.02",
        "--step-per-seq",
        "0.0005",
        "--max-batch",
        "256",
        "--duration",
        "300",
        "--seed",
        "1",
    ]
    got = runner.invoke(command, [*args, "--json"])
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    assert data["analytic"]["in_flight"] == pytest.approx(637.5)
    assert data["in_flight"]["mean"] == pytest.approx(637.5, rel=0.05)
    png = tmp_path / "q.png"
    got = runner.invoke(command, ["--rate", "50", "--replicas", "10", "--duration", "200", "--plot", str(png)])
    assert got.exit_code == 0, got.output
    assert "does not drain" in got.output and png.exists()
    got = runner.invoke(
        command, ["--model", "mmc", "--rate", "2", "--servers", "3", "--service-time", "1", "--duration", "5000"]
    )
    assert got.exit_code == 0 and "P(wait)" in got.output
    bad = runner.invoke(command, ["--rate", "-3"])
    assert isinstance(bad.exception, UsageError)
