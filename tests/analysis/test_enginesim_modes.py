"""The engine simulator's serving modes: speculative decoding and disaggregated prefill/decode.

Every assertion counts or compares simulated quantities (no wall clock). Physical properties are
checked on hand-made step models (a 10 ms step plus 0.1 ms per prompt token) and on the packs'
constants; measured points (``tests/data/spec_decode_refs.yaml``) are replayed at the end.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import flat_step
from ruamel.yaml import YAML

import concur
from concur.analysis.arrivals import Synthetic
from concur.analysis.enginesim import StepRecord, simulate_engine
from concur.analysis.enginesim_disagg import (
    KVLink,
    Pool,
    catalog_link,
    kv_bytes_per_token,
    simulate_disagg,
    solve_pools,
)
from concur.analysis.speculation import Speculation
from concur.analysis.step_model import EngineLimits, solve_engine
from concur.cli import cli
from concur.errors import BudgetError, InfeasibleError, UsageError

DATA = Path(__file__).resolve().parents[1] / "data"

STEP = flat_step()
ROOMY = EngineLimits(kv_blocks=2000, block_size=16, max_num_seqs=16, token_budget=512, mixed=True)
# a draft step of 1 ms: 3 of them per speculative step
DRAFT = Speculation(
    draft_tokens=3,
    acceptance_rate=0.0,
    weights_time=0.0,
    kv_time_per_token=0.0,
    token_time=0.0,
    fixed=0.001,
    efficiency=1.0,
)
CONFIG = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "engine": "vllm", "input_tokens": 500, "output_tokens": 200}


# -- speculative decoding ---------------------------------------------------------------------------


def test_acceptance_draws_follow_the_iid_process() -> None:
    rng = np.random.default_rng(7)
    for alpha in (0.0, 0.3, 0.8, 0.99):
        spec = replace(DRAFT, acceptance_rate=alpha)
        draws = spec.draw(rng, 200_000)
        assert draws.min() >= 1 and draws.max() <= spec.verify
        sigma = float(draws.std()) / math.sqrt(len(draws))
        assert abs(float(draws.mean()) - spec.mean_tokens) <= 4 * sigma + 1e-12, alpha
        # P(tokens >= 1 + j) = alpha^j for j <= k
        for j in range(1, spec.verify):
            assert float((draws >= 1 + j).mean()) == pytest.approx(alpha**j, abs=0.01)
    a = DRAFT.draw(np.random.default_rng(1), 50)
    assert (a == 1).all()
    with pytest.raises(UsageError, match="acceptance_rate"):
        replace(DRAFT, acceptance_rate=1.0)
    with pytest.raises(UsageError, match="draft_tokens"):
        replace(DRAFT, draft_tokens=0)


@pytest.mark.parametrize("closed", [False, True], ids=["open", "closed"])
@pytest.mark.parametrize("mixed", [True, False], ids=["mixed", "separate"])
def test_acceptance_zero_is_never_faster_than_no_speculation(closed: bool, mixed: bool) -> None:
    """The issue's must-hold: a draft the target never accepts only adds the draft's steps and the
    verification's wider step, so every latency is at least the plain run's and the throughput at most."""
    for step, limits in (
        (STEP, replace(ROOMY, mixed=mixed)),
        (*solve_engine({**CONFIG, "draft_tokens": 3, "acceptance_rate": 0, "mtp_layers": 1}, mixed=mixed)[:2],),
    ):
        spec_step = replace(step, spec=step.spec or DRAFT)
        plain = replace(step, spec=None)
        kw: dict[str, Any] = {"requests": 150, "warmup": 30}
        if closed:
            kw["concurrency"] = 8
        load = 3.0 if step is STEP else 20.0
        base = simulate_engine(plain, limits, Synthetic(load, 120, 80, seed=3), **kw)
        spec = simulate_engine(spec_step, limits, Synthetic(load, 120, 80, seed=3), **kw)
        assert spec.spec_tokens_per_step == 1.0
        for name in ("ttft", "tpot"):
            for stat in ("mean", "p50", "p90"):
                s, b = getattr(getattr(spec, name), stat), getattr(getattr(base, name), stat)
                assert s >= b * (1 - 1e-12), (name, stat, s, b)
        if closed:
            assert spec.output_tokens_per_s <= base.output_tokens_per_s * (1 + 1e-12)


def test_higher_acceptance_decodes_faster_and_counts_its_tokens() -> None:
    tpots = []
    for alpha in (0.0, 0.4, 0.7, 0.9):
        step = replace(STEP, spec=replace(DRAFT, acceptance_rate=alpha))
        res = simulate_engine(step, ROOMY, Synthetic(1.0, 100, 300, seed=2), requests=60, warmup=8, concurrency=4)
        tpots.append(res.tpot.mean)
        expected = replace(DRAFT, acceptance_rate=alpha).mean_tokens
        # the last step of a request is capped at what it still owes, so the measured mean is a little lower
        assert expected * 0.93 <= res.spec_tokens_per_step <= expected * (1 + 1e-9) + 0.02, alpha
    assert tpots == sorted(tpots, reverse=True) and tpots[-1] < tpots[0] / 2


@pytest.mark.parametrize("mixed", [True, False], ids=["mixed", "separate"])
def test_speculative_scheduler_invariants(mixed: bool) -> None:
    """Budget counts k + 1 tokens per decoding sequence; KV blocks hold the verified tokens; every
    request emits exactly its output tokens and finishes once; determinism by seed."""
    limits = EngineLimits(kv_blocks=60, block_size=16, max_num_seqs=6, token_budget=96, mixed=mixed)
    step = replace(STEP, spec=replace(DRAFT, acceptance_rate=0.7))
    seen: list[StepRecord] = []

    def go(seed: int, observe: Any = None) -> Any:
        return simulate_engine(
            step, limits, Synthetic(3.0, 120, 80, seed=1), requests=120, warmup=20, observe=observe, seed=seed
        )

    res = go(1, seen.append)
    for s in seen:
        assert 0 <= s.kv_used <= limits.kv_blocks and s.running <= limits.max_num_seqs and s.repeat == 1
        if mixed:
            assert len(s.decode) * 4 + sum(c for _, c in s.prefill) <= limits.token_budget
    finished = Counter(res.finish_order)
    assert max(finished.values()) == 1 and set(range(20, 140)) <= set(finished)
    assert 2.0 < res.spec_tokens_per_step < 3.0
    assert go(1).as_dict() == res.as_dict() and go(2).as_dict() != res.as_dict()


def test_a_speculative_step_is_the_packs_t_step() -> None:
    """The adapter takes the pack's speculation apart without changing it (dense model, draft model)."""
    cfg = {
        **CONFIG,
        "model": "llama-3.1-70b",
        "tp": 4,
        "draft_tokens": 3,
        "acceptance_rate": 0.7,
        "draft_params": "1.23e9 parameter",
        "draft_layers": 16,
    }
    step, _, values = solve_engine(cfg)
    assert step.spec is not None and step.spec.verify == 4
    for b in (1, 37, 256):
        pack = concur.solve(
            packs=["llm_throughput"], find=["t_step"], given={**cfg, "concurrency": f"{b} request", "kv_fit": "ignore"}
        )
        context = b * values["avg_context"]
        mine = step.time(b, context, 0, 0.0, 0.0, 4) + step.spec.draft_time(b, context)
        assert mine == pytest.approx(pack.value("t_step", "s"), rel=1e-9)
    by_length = {k: v for k, v in cfg.items() if k != "acceptance_rate"}
    measured = solve_engine({**by_length, "spec_tokens_per_step": 2.5})[0].spec
    assert measured is not None and measured.mean_tokens == pytest.approx(2.5, rel=1e-6)


# -- disaggregated prefill/decode ------------------------------------------------------------------

LINK = KVLink(bandwidth=1e9, latency=0.002)  # 1 GB/s per GPU: a 120-token prompt at 1 kB/token takes 0.12 ms + 2 ms


def pools(p: int = 1, d: int = 2, **kw: Any) -> tuple[Pool, Pool]:
    limits = replace(ROOMY, mixed=False)
    return Pool(STEP, limits, p, kw.get("ptp", 1)), Pool(
        kw.get("dstep", STEP), kw.get("dlimits", limits), d, kw.get("dtp", 1)
    )


def disagg(p: int = 1, d: int = 2, rate: float = 3.0, link: KVLink = LINK, **kw: Any) -> Any:
    pre, dec = pools(p, d, **kw)
    return simulate_disagg(
        pre,
        dec,
        link,
        Synthetic(rate, 120, 80, seed=kw.get("seed", 1)),
        kv_bytes=1000.0,
        requests=kw.get("requests", 200),
        warmup=30,
        concurrency=kw.get("concurrency"),
        observe=kw.get("observe"),
        max_events=kw.get("max_events", 1_000_000),
    )


@pytest.mark.parametrize("layout", [(1, 1, None), (1, 2, None), (2, 3, None), (1, 2, 6)], ids=str)
def test_coalesced_disagg_decode_steps_change_nothing_but_the_event_count(layout: tuple[int, int, Any]) -> None:
    p, d, clients = layout
    pre, dec = pools(p, d)

    def go(coalesce: bool) -> Any:
        return simulate_disagg(
            pre, dec, LINK, Synthetic(2.0, 120, 80, seed=4), kv_bytes=1000.0, requests=150, warmup=20,
            concurrency=clients, coalesce=coalesce,
        )  # fmt: skip

    one, many = go(False), go(True)
    assert many.events < one.events / (2 if clients is None else 1)
    a, b = one.as_dict(), many.as_dict()
    a.pop("events"), b.pop("events")
    assert a.keys() == b.keys()
    for key in a:
        assert json.dumps(a[key], sort_keys=True) == json.dumps(b[key], sort_keys=True) or _close(a[key], b[key]), key
    assert one.finish_order == many.finish_order


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == pytest.approx(b, rel=1e-9, abs=1e-12)
    return bool(a == b)


def test_disagg_conserves_requests_and_holds_its_pools() -> None:
    seen: list[StepRecord] = []
    limits = EngineLimits(kv_blocks=40, block_size=16, max_num_seqs=3, token_budget=256, mixed=False)
    res = disagg(1, 2, rate=4.0, dlimits=limits, observe=seen.append)
    finished = Counter(res.finish_order)
    assert max(finished.values()) == 1 and set(range(30, 230)) <= set(finished) and res.recorded == 200
    for s in seen:
        if s.replica >= 1:  # decode workers
            assert not s.prefill and s.kv_used <= limits.kv_blocks and s.running <= limits.max_num_seqs
        else:
            assert not s.decode and sum(c for _, c in s.prefill) <= ROOMY.token_budget
    assert res.engine == "disagg" and res.disagg is not None and res.disagg.decode_workers == 2
    # a decode pool of 2 x 3 seats backs up: hand-offs wait for a seat, so they take longer than the transfer
    assert res.disagg.handoff.p90 > res.disagg.transfer.p90


def test_disagg_ttft_is_prefill_plus_transfer_plus_first_decode_step() -> None:
    """One client: nothing queues, so every TTFT is exactly the prompt's prefill, the transfer and one
    decode step; under load it is never less."""
    prefill = STEP.time(0, 0.0, 120, 120 * 121 / 2, 120.0)
    transfer = LINK.latency + 120 * 1000.0 / LINK.bandwidth
    first = STEP.time(1, 121.0, 0, 0.0, 0.0)
    alone = disagg(1, 1, concurrency=1, requests=20)
    assert alone.ttft.p50 == pytest.approx(prefill + transfer + first, rel=1e-12)
    assert alone.ttft.p99 == pytest.approx(alone.ttft.p50, rel=1e-12)
    assert alone.tpot.mean == pytest.approx(STEP.time(1, 150.0, 0, 0.0, 0.0), rel=1e-12)
    assert alone.disagg.transfer.mean == pytest.approx(transfer, rel=1e-12)
    loaded = disagg(1, 2, rate=5.0)
    assert loaded.ttft.p50 >= (prefill + transfer + first) * (1 - 1e-12)


PACK_TTFT_TOLERANCE = 0.05  # |simulated mean TTFT / llm_disagg's ttft - 1| at light load


def _solve_1p1d(given: dict[str, Any], find: list[str], *, prefill_tp: int, rate: float) -> Any:
    """llm_disagg for one prefill worker of ``prefill_tp`` GPUs and one decode worker, 1,000 in / 400 out."""
    return concur.solve(
        find=find,
        given={
            **given,
            "prefill_tp": prefill_tp,
            "kv_link": "ib-ndr-400g",
            "arrival_rate": f"{rate} request/s",
            "prefill_workers": 1,
            "decode_workers": 1,
            "input_tokens": "1000 token/request",
            "output_tokens": "400 token/request",
        },
        packs="llm_disagg",
    )


@pytest.mark.parametrize("rate", [1.0, 3.0])
def test_disagg_ttft_agrees_with_the_pack_at_light_load(rate: float) -> None:
    """Llama-3.1-70B bf16 on H100, one prefill worker (TP4) and one decode worker (TP4), 1,000 in /
    400 out over ib-ndr-400g: the simulator's mean TTFT and llm_disagg's ttft for the same fleet and
    rate are one quantity (queue, prefill, transfer, the decode worker's first step), within 5 %. The
    pack's ttft without the decode worker's first step (its old meaning) misses by more than 25 %."""
    given = {**CONFIG, "model": "llama-3.1-70b", "tp": 4, "weight_dtype": "bf16", "kv_dtype": "bf16"}
    given.update(input_tokens=1000, output_tokens=400)
    names = ["ttft", "decode_first_step", "kv_transfer_time", "itl"]
    sol = _solve_1p1d(given, names, prefill_tp=4, rate=rate)
    pack = {n: float(sol[n].to("s").magnitude) for n in names}
    prefill, decode, kv_bytes, _ = solve_pools(given, {"tp": 4, "workers": 1}, {"tp": 4, "workers": 1})
    link = catalog_link("ib-ndr-400g")
    res = simulate_disagg(
        prefill, decode, link, Synthetic(rate, 1000, 400, seed=1), kv_bytes=kv_bytes, requests=400, warmup=100
    )
    assert res.stable and res.recorded == 400
    assert res.disagg is not None and res.disagg.transfer.mean == pytest.approx(pack["kv_transfer_time"], rel=1e-9)
    assert res.tpot.mean == pytest.approx(pack["itl"], rel=PACK_TTFT_TOLERANCE)
    assert res.ttft.mean == pytest.approx(pack["ttft"], rel=PACK_TTFT_TOLERANCE)
    without_first_step = pack["ttft"] - pack["decode_first_step"]
    assert res.ttft.mean > 1.25 * without_first_step


LOADED_POOL_TOLERANCE = 0.10  # |simulated mean TTFT / llm_disagg's ttft - 1| with a prefill pool 74-78 % busy


@pytest.mark.parametrize(
    ("dtype", "prefill_tp", "prefill_workers", "tp"),
    [("bf16", 4, 5, 4), ("fp8", 1, 8, 2)],
    ids=["5P-tp4-bf16", "8P-tp1-fp8"],
)
def test_disagg_ttft_agrees_with_the_pack_at_a_loaded_prefill_pool(
    dtype: str, prefill_tp: int, prefill_workers: int, tp: int
) -> None:
    """Llama-3.1-70B on H100 at 50 req/s, 1,000 in / 400 out, three decode workers: several prefill
    workers 70-76 % busy in full passes (the second layout is ``concur plan``'s cheapest disaggregated row for this
    traffic). The simulator routes each prompt to the least-loaded prefill worker, as the
    disaggregated routers do, so the pool queues as one M/D/c queue: its mean TTFT is within 10 % of
    llm_disagg's ttft (M/D/c wait, Cosmetatos): 150.6 ms against 139.0 ms and 207.0 ms against
    192.6 ms. It sits 7-8 % above, since a prompt queued behind a busy worker stays there when
    another frees first (and a pass of a dense model's prompts shares only its fixed costs). The wait of one M/D/1 queue per worker with an even share of the prompts
    (the pack's first model) put the pack's TTFT 1.6 and 1.9 times above the simulated one."""
    given = {**CONFIG, "model": "llama-3.1-70b", "tp": tp, "weight_dtype": dtype, "kv_dtype": dtype}
    given.update(input_tokens=1000, output_tokens=400)
    names = ["ttft", "prefill_wait", "prefill_service"]
    sol = concur.solve(
        find=[*names, "prefill_pool_load"],
        given={
            **given,
            "prefill_tp": prefill_tp,
            "kv_link": "ib-ndr-400g",
            "arrival_rate": "50 request/s",
            "prefill_workers": prefill_workers,
            "decode_workers": 3,
            "input_tokens": "1000 token/request",
            "output_tokens": "400 token/request",
        },
        packs="llm_disagg",
    )
    pack = {n: float(sol[n].to("s").magnitude) for n in names}
    rho = float(sol.values["prefill_pool_load"])
    assert 0.65 < rho < 0.8
    prefill, decode, kv_bytes, _ = solve_pools(
        given, {"tp": prefill_tp, "workers": prefill_workers}, {"tp": tp, "workers": 3}
    )
    res = simulate_disagg(
        prefill,
        decode,
        catalog_link("ib-ndr-400g"),
        Synthetic(50.0, 1000, 400, seed=1),
        kv_bytes=kv_bytes,
        requests=2000,
        warmup=300,
        max_events=60_000,
    )
    assert res.stable and res.recorded == 2000
    assert res.ttft.mean == pytest.approx(pack["ttft"], rel=LOADED_POOL_TOLERANCE)
    per_worker_md1 = pack["prefill_service"] * rho / (2 * (1 - rho))
    old_ttft = pack["ttft"] - pack["prefill_wait"] + per_worker_md1
    assert old_ttft > (1 + 3 * LOADED_POOL_TOLERANCE) * res.ttft.mean


MOE_POOL = {
    "model": "deepseek-v3",
    "gpu": "h200-sxm-141gb",
    "engine": "sglang",
    "tp": 8,
    "ep": 8,
    "dp_attention": 8,
    "weight_dtype": "fp8",
    "kv_dtype": "fp8",
}
MOE_POOL_TOLERANCE = 0.15  # |llm_disagg's ttft / the simulated mean TTFT - 1|, one MoE prefill worker 68-85 % busy


@pytest.mark.parametrize("rate", [20.0, 25.0])
def test_one_moe_prefill_worker_batches_its_prompts_as_the_pack_says(rate: float) -> None:
    """DeepSeek-V3 on H200 (EP8, DP attention), one TP8 prefill worker and one decode worker, 1,000 in /
    400 out, the worker allowed to be fully busy (utilization 1). A pass of one prompt is one read of the
    FP8 weights (32 ms: the experts split over the eight GPUs, the attention weights whole on each), the
    layout's all-to-all and the fixed cost: 42 ms. So prompts that arrive faster than one per 42 ms can
    only be served in shared passes: the simulator's prefill worker fills each pass from its queue (up to
    the 8,192-token budget) and carries 20 and 25 request/s stably. A shared pass reads the weights once
    but each prompt still pays its routed experts' grouped GEMMs at SGLang's expert-parallel MoE rate for
    DeepSeek-V3's expert shape and its attention at SGLang's MLA kernel rate on Hopper, so llm_disagg sizes
    the pool on a prompt's share of a full pass of 32.0 ms (one worker, 64 % and 80 % busy) and its TTFT is
    within 15 % of the simulated mean (141.8 ms against 164.4 ms, 189.9 ms against 220.0 ms). One pass per
    prompt would find one worker at 25 request/s 1.06 times overloaded."""
    given = {**MOE_POOL, "input_tokens": 1000, "output_tokens": 400, "utilization": 1}
    sol = _solve_1p1d(
        given, ["ttft", "prefill_pool_load", "prefill_service", "prefill_batched_service"], prefill_tp=8, rate=rate
    )
    service = float(sol["prefill_service"].to("s").magnitude)
    assert float(sol["prefill_batched_service"].to("s").magnitude) < 0.85 * service
    assert float(sol.values["prefill_pool_load"]) < 0.9
    if rate == 25.0:
        assert rate * service > 1  # one prompt a pass could not keep up
    prefill, decode, kv_bytes, _ = solve_pools(given, {"tp": 8, "workers": 1}, {"tp": 8, "workers": 1})
    res = simulate_disagg(
        prefill,
        decode,
        catalog_link("ib-ndr-400g"),
        Synthetic(rate, 1000, 400, seed=1),
        kv_bytes=kv_bytes,
        requests=1000,
        warmup=300,
    )
    assert res.stable and res.disagg is not None and res.disagg.prefill_batch > 1300  # shared passes
    assert float(sol["ttft"].to("s").magnitude) == pytest.approx(res.ttft.mean, rel=MOE_POOL_TOLERANCE)


def test_more_decode_workers_are_never_worse() -> None:
    runs = [disagg(1, d, rate=6.0) for d in (1, 2, 4)]
    for fewer, more in itertools.pairwise(runs):
        assert more.tpot.mean <= fewer.tpot.mean * (1 + 1e-9)
        assert more.ttft.p90 <= fewer.ttft.p90 * (1 + 1e-9)
        assert more.mean_decode_batch < fewer.mean_decode_batch


def test_a_slower_link_costs_ttft_and_lanes_are_the_smaller_tp() -> None:
    fast = disagg(1, 2, rate=3.0)
    slow_link = KVLink(bandwidth=1e7, latency=0.002)  # 12 ms per 120-token prompt
    slow = disagg(1, 2, rate=3.0, link=slow_link)
    assert slow.disagg.transfer.mean - fast.disagg.transfer.mean == pytest.approx(0.012 - 0.00012, rel=1e-9)
    assert slow.ttft.mean >= fast.ttft.mean + 0.9 * (slow.disagg.transfer.mean - fast.disagg.transfer.mean)
    assert slow.disagg.link_utilization > fast.disagg.link_utilization
    wide = disagg(1, 2, rate=3.0, link=slow_link, ptp=2, dtp=8)  # two GPU links in parallel
    assert wide.disagg.transfer.mean == pytest.approx(0.002 + 0.012 / 2, rel=1e-9)


def test_disagg_queue_growth_is_detected() -> None:
    # a prefill step of 120 tokens costs 22 ms: one worker serves ~45 prompts/s at most, less in practice
    calm = disagg(1, 4, rate=5.0)
    flood = disagg(1, 4, rate=80.0, requests=400)
    assert calm.stable and not flood.stable and flood.queue_second_half > flood.queue_first_half + 1
    more_prefill = disagg(3, 4, rate=80.0, requests=400)
    assert more_prefill.ttft.p90 < flood.ttft.p90


def test_disagg_with_speculating_decode_workers() -> None:
    spec_step = replace(STEP, spec=DRAFT)
    plain = disagg(1, 2, rate=4.0)
    never = disagg(1, 2, rate=4.0, dstep=spec_step)
    good = disagg(1, 2, rate=4.0, dstep=replace(STEP, spec=replace(DRAFT, acceptance_rate=0.8)))
    assert never.tpot.mean >= plain.tpot.mean and never.ttft.mean >= plain.ttft.mean * (1 - 1e-12)
    assert good.tpot.mean < plain.tpot.mean and good.spec_tokens_per_step > 2


def test_disagg_refusals() -> None:
    with pytest.raises(BudgetError, match=r"after 300 events \(max_events\)"):
        disagg(1, 1, rate=5.0, max_events=300)
    with pytest.raises(InfeasibleError, match="one decode worker's pool"):
        disagg(1, 1, dlimits=EngineLimits(kv_blocks=5, block_size=16, max_num_seqs=4, token_budget=64, mixed=False))
    with pytest.raises(UsageError, match="link_bandwidth"):
        KVLink(0.0, 1e-6)
    with pytest.raises(UsageError, match="workers"):
        Pool(STEP, ROOMY, 0)


def test_kv_bytes_per_token_is_the_whole_models() -> None:
    """Every layer, every KV head once, whatever the prefill worker's tp (heads replicated past 8)."""
    for tp, expected in ((2, 327_680.0), (4, 327_680.0), (8, 327_680.0), (16, 327_680.0)):
        _, _, values = solve_engine({**CONFIG, "model": "llama-3.1-70b", "tp": tp})
        assert kv_bytes_per_token(values, 8.0) == pytest.approx(expected), tp  # 2 x 80 x 8 x 128 x 2 B
    _, _, values = solve_engine(
        {**CONFIG, "model": "deepseek-v3", "gpu": "h200-sxm-141gb", "tp": 8, "weight_dtype": "fp8", "kv_dtype": "fp8"}
    )
    assert kv_bytes_per_token(values, 8.0) == pytest.approx(61 * (512 + 64) * 1.0)  # MLA latent, fp8


def test_solved_pools_carry_their_own_gpu_and_tp() -> None:
    p, d, kv, _ = solve_pools(
        {**CONFIG, "model": "llama-3.1-70b", "draft_tokens": 2, "acceptance_rate": 0.6, "mtp_layers": 1},
        {"tp": 2, "workers": 1},
        {"gpu": "h200-sxm-141gb", "tp": 4, "workers": 3},
    )
    assert (p.tp, p.workers, d.tp, d.workers) == (2, 1, 4, 3)
    assert p.step.spec is None and d.step.spec is not None  # only decode workers speculate
    assert d.limits.kv_blocks > p.limits.kv_blocks and kv == pytest.approx(327_680.0)


# -- the command line -------------------------------------------------------------------------------

SETS = [x for k, v in CONFIG.items() for x in ("--set", f"{k}={v}")]
DISAGG = ["simulate", "--model", "engine", "--mode", "disagg", "--prefill-workers", "1", "--decode-workers", "2"]


def test_cli_disagg_table_and_json() -> None:
    runner = CliRunner()
    link = ["--link-bandwidth", "50 GB/s", "--link-latency", "10"]
    got = runner.invoke(cli, [*DISAGG, *SETS, *link, "--rate", "4", "--requests", "200", "--set", "ttft_p90_slo=2 s"])
    assert got.exit_code == 0, got.output
    assert "disaggregated, 1 prefill worker(s)" in got.output and "KV transfer" in got.output
    assert "SLA: met" in got.output and "stable" in got.output
    got = runner.invoke(
        cli, [*DISAGG, *SETS, *link, "--prefill-tp", "2", "--concurrency", "4", "--requests", "40", "--json"]
    )
    assert got.exit_code == 0, got.output
    doc = json.loads(got.output)
    assert doc["mode"] == "disagg" and doc["prefill"]["tp"] == 2 and doc["decode"]["workers"] == 2
    assert doc["link"]["bandwidth"] == {"value": pytest.approx(50.0), "unit": "GB/s"}
    assert doc["disagg"]["transfer"]["mean"] == pytest.approx(10e-6 + 500 * 131072 / (50e9 * 1), rel=1e-9)
    spec = runner.invoke(
        cli,
        ["simulate", "--model", "engine", *SETS, "--set", "draft_tokens=3", "--set", "spec_tokens_per_step=2.4"]
        + ["--set", "mtp_layers=1", "--concurrency", "4", "--requests", "40"],
    )
    assert spec.exit_code == 0, spec.output
    assert "speculation" in spec.output and "tokens per sequence and decode step" in spec.output


@pytest.mark.parametrize(
    "args, words",
    [
        (["--mode", "disagg", "--prefill-workers", "1"], "--mode disagg needs --decode-workers"),
        (["--mode", "disagg", "--prefill-workers", "1", "--decode-workers", "1"], "needs a link"),
        (["--prefill-workers", "2"], "add --mode disagg"),
        (DISAGG[3:] + ["--link-bandwidth", "50"], "--link-latency is missing"),
        (DISAGG[3:] + ["--link-bandwidth", "3 ms", "--link-latency", "2"], "is not a bandwidth"),
        (DISAGG[3:] + ["--link-bandwidth", "5", "--link-latency", "2", "--kv-link", "x"], "one or the other"),
        (DISAGG[3:] + ["--link-bandwidth", "5", "--link-latency", "2", "--replicas", "3"], "--replicas"),
        (DISAGG[3:] + ["--link-bandwidth", "0", "--link-latency", "2"], "link_bandwidth must be"),
    ],
)
def test_cli_bad_layouts_get_one_line(capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    from concur.cli import main

    with pytest.raises(SystemExit) as done:
        main(["simulate", "--model", "engine", *args, *SETS, "--rate", "2"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert done.value.code == 2 and len(err) == 1 and words in err[0], err


# -- plan --verify ----------------------------------------------------------------------------------

QUESTION = {
    "model": "llama-3.1-70b",
    "arrival_rate": 8,
    "input_tokens": 1000,
    "output_tokens": 400,
    "kv_link_bandwidth": "50 GB/s",
    "kv_link_latency": 10,
}
ROW = {
    "mode": "disagg",
    "gpu": "h100-sxm-80gb",
    "tp": 4,
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
    "engine": "vllm",
    "prefill": {"gpu": "h100-sxm-80gb", "tp": 4, "workers": 1},
    "decode": {"gpu": "h100-sxm-80gb", "tp": 4, "workers": 2},
}


@dataclass(frozen=True)
class _Config:
    """A stand-in for the plan's Config of a disaggregated row (the plan gives its config a mode)."""

    gpu: str
    tp: int
    weight_dtype: str
    kv_dtype: str
    engine: str
    mode: str = "disagg"

    def given(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "tp": self.tp,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "engine": self.engine,
        }


@dataclass
class _Candidate:
    config: Any
    prefill: dict[str, Any]
    decode: dict[str, Any]
    feasible: bool = True
    replicas: int | None = None
    batch: float | None = None


def test_verify_a_disaggregated_row_as_json_and_as_candidate() -> None:
    from concur.analysis.verify import disagg_layout, verify_disagg_row

    slo = {"ttft_p90_slo": 2.0, "itl_p90_slo": 0.05}
    as_json = verify_disagg_row(QUESTION, ROW, 8.0, slo, requests=300)
    cand = _Candidate(_Config("h100-sxm-80gb", 4, "bf16", "bf16", "vllm"), ROW["prefill"], ROW["decode"])
    as_cand = verify_disagg_row(QUESTION, cand, 8.0, slo, requests=300)
    assert as_json.as_dict() == as_cand.as_dict()
    doc = as_json.as_dict()
    assert doc["scheduler"] == "disagg" and doc["meets_sla"] is True and doc["ttft_p90"]["unit"] == "ms"
    tight = verify_disagg_row(QUESTION, ROW, 8.0, {"itl_p90_slo": 0.001}, requests=100)
    assert not tight.meets_sla and tight.misses[0].startswith("ITL p90")
    spec = verify_disagg_row(
        QUESTION, {**ROW, "spec": {"draft_tokens": 3, "acceptance_rate": 0.8, "mtp_layers": 1}}, 8.0, slo, requests=200
    )
    assert spec.result is not None and spec.result.spec_tokens_per_step > 2
    assert spec.result.tpot.mean < as_json.result.tpot.mean
    assert disagg_layout({**ROW, "mode": "agg"}) is None
    with pytest.raises(UsageError, match="decode pool's workers"):
        disagg_layout({**ROW, "decode": {"gpu": "h100-sxm-80gb", "tp": 4}})


def test_verify_plan_dispatches_disaggregated_rows() -> None:
    from concur.analysis.fleet_plan import Candidate, Config, FleetPlan
    from concur.analysis.verify import verify_plan

    agg = Candidate(Config("h100-sxm-80gb", 4, "bf16", "bf16", "vllm"), feasible=True, replicas=2, batch=30.0)
    dis = _Candidate(_Config("h100-sxm-80gb", 4, "bf16", "bf16", "vllm"), ROW["prefill"], ROW["decode"])
    result = FleetPlan(QUESTION, [agg, dis], arrival_rate=8.0)  # type: ignore[list-item]
    out = verify_plan(result, 2, {"ttft_p90_slo": 2.0}, requests=150)
    assert set(out) == {agg.config, dis.config}
    assert out[dis.config].scheduler == "disagg" and out[agg.config].scheduler == "mixed"


# -- against measured speculative decoding ----------------------------------------------------------

SPEC_REFS = YAML(typ="safe").load((DATA / "spec_decode_refs.yaml").read_text())
SPEC_MEDIAN = 0.15  # median |simulated / measured TPOT - 1| over the speculative points
SPEC_WORST = 1.35  # and no point (the baseline included) off by more than this factor


def _measured_tpot(extra: dict[str, Any]) -> float:
    common = SPEC_REFS["common"]
    inp, out = common["input_tokens"], common["output_tokens"]
    step, limits, _ = solve_engine({**common, **extra})
    res = simulate_engine(step, limits, Synthetic(1.0, inp, out, seed=1), requests=30, warmup=2, concurrency=1)
    return float(res.tpot.mean * 1e3)


@pytest.fixture(scope="module")
def spec_errors() -> dict[str, tuple[float, float]]:
    """Per point: simulated / measured TPOT, and simulated / measured speedup over no speculation."""
    base = _measured_tpot({"mtp_layers": 0})
    out = {"baseline": (base / SPEC_REFS["baseline_tpot_ms"], 1.0)}
    for ref in SPEC_REFS["points"]:
        sim = _measured_tpot({"draft_tokens": ref["draft_tokens"], "spec_tokens_per_step": ref["acceptance_length"]})
        speedup = (base / sim) / (SPEC_REFS["baseline_tpot_ms"] / ref["tpot_ms"])
        out[ref["id"]] = (sim / ref["tpot_ms"], speedup)
    return out


def test_speculative_tpot_against_measured_points(spec_errors: dict[str, tuple[float, float]]) -> None:
    """EAGLE 1 and 3 on Llama-3.1-8B at batch 1, k = 2..7, each at its measured acceptance length: the
    simulated TPOT against the measured one (median within 15 %, none off by more than x1.35). The
    speedup over no speculation is overstated (median about x1.45 of the measured): the pack's vanilla
    batch-1 step is ~31 % slower than measured, and its draft cost leaves out the draft's LM-head read --
    both the pack's constants, reported, not hidden by this test."""
    assert len(SPEC_REFS["points"]) >= 12
    ratios = {k: r for k, (r, _) in spec_errors.items() if k != "baseline"}
    errors = sorted(abs(r - 1) for r in ratios.values())
    assert errors[len(errors) // 2] <= SPEC_MEDIAN, spec_errors
    worst = {k: round(r, 3) for k, (r, _) in spec_errors.items() if not 1 / SPEC_WORST <= r <= SPEC_WORST}
    assert not worst, worst
    # never pessimistic about what speculation buys at a measured acceptance length
    assert all(s >= 1.0 for k, (_, s) in spec_errors.items() if k != "baseline"), spec_errors


LINKS = """catalog: links
doc: a test link
fields:
  kv_link_bandwidth: {unit: GB/s, doc: "bandwidth of one GPU's path to the other pool, per direction"}
  kv_link_latency: {unit: us, doc: "fixed one-way latency of one transfer"}
entries:
  test-link:
    name: a link for tests
    kv_link_bandwidth: {value: 25, source: "a test value"}
    kv_link_latency: {value: 4, source: "a test value"}
"""


def test_a_link_from_the_links_catalog(tmp_path: Path) -> None:
    from concur.analysis.enginesim_disagg import catalog_link, question_link
    from concur.lang.library import set_catalog_path

    (tmp_path / "links.yaml").write_text(LINKS)
    set_catalog_path([tmp_path])
    try:
        link = catalog_link("test-link")
        assert (link.bandwidth, link.latency) == (pytest.approx(25e9), pytest.approx(4e-6))
        assert question_link({"kv_link": "test-link"})[0] == link
        got = CliRunner().invoke(
            cli, [*DISAGG, *SETS, "--kv-link", "test-link", "--concurrency", "2", "--requests", "10", "--json"]
        )
        assert got.exit_code == 0, got.output
        assert json.loads(got.output)["link"]["id"] == "test-link"
        with pytest.raises(UsageError, match="unknown link 'nope'"):
            catalog_link("nope")
    finally:
        set_catalog_path([])
    given = question_link({"kv_link_bandwidth": "400 Gbit/s", "kv_link_latency": "2 us"})[0]
    assert (given.bandwidth, given.latency) == (pytest.approx(50e9), pytest.approx(2e-6))
    with pytest.raises(UsageError, match="kv_link_latency is missing"):
        question_link({"kv_link_bandwidth": 50})
