"""``concur bench sweep``: a 100,000-point throughput sweep against hand-written numpy.

The sweep (:func:`concur.sweep.vector.sweep`) compiles each block of the ``llm_throughput`` pack once
and evaluates it over the whole concurrency array. The baseline is the same formula written by
hand in numpy (weights and KV read over bandwidth, weight and attention FLOPs over the achievable
peak, the slower one over the efficiency plus the fixed cost, including the pack's MoE-aware
weight read), with the
per-configuration constants taken from the same solve, so only the evaluation is compared.
Targets: under 1 s, at most 2x the hand-written code. Both answers are checked equal (rel
1e-9) before any time is reported.

Times are the median of ``--runs`` runs after one warm-up, which builds and caches the plan
(one structural solve and one scalar validation solve); timed runs pay only for evaluation.
"""

from __future__ import annotations

import os
import statistics
import time

import click

__all__ = ["command"]

GIVEN = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "weight_dtype": "bf16", "kv_dtype": "bf16",
         "input_tokens": 1024, "output_tokens": 2048}


def _hand(c, weights, a, decay, kv_per_token, avg_context, bw, active_per_gpu,  # type: ignore[no-untyped-def]
          attention, peak, flops_fraction, eff, t_fixed, gpus):
    import numpy as np

    weights_read = weights * (1.0 - (1.0 - a) * np.exp(-decay * (c - 1.0)))  # the pack's MoE-aware read
    memory = (weights_read + c * avg_context * kv_per_token) / bw
    compute = (2.0 * active_per_gpu + attention) * c / peak
    t_step = np.maximum(memory, compute / flops_fraction) / eff + t_fixed  # tp 1: no all-reduce
    return c / t_step / gpus


@click.command(name="sweep")
@click.option("--points", type=int, default=100_000, show_default=True, help="concurrency values swept")
@click.option("--runs", type=int, default=5, show_default=True, help="timed runs (median reported)")
def command(points: int, runs: int) -> None:
    """Time a vectorised sweep of llm_throughput (tokens_per_s_per_gpu over concurrency)."""
    import numpy as np

    from ..lang.model import build_model
    from ..solver.question import save_inverse_cache, solve_model
    from ..sweep.vector import sweep

    if points < 1 or runs < 1:
        raise click.UsageError("--points and --runs must be positive")
    model = build_model(["llm_throughput"])
    c = np.linspace(1.0, 1024.0, points)
    sweep(model, {"concurrency": c[:10]}, GIVEN, ["tokens_per_s_per_gpu"])  # warm-up
    save_inverse_cache(model)
    wanted = ("weights_per_gpu", "active_fraction", "expert_decay", "kv_per_token", "avg_context",
              "active_params_per_gpu", "attention_flops", "peak_flops", "efficiency", "t_fixed", "gpus")
    # active_fraction asked for: a preset's active_params does not compute it
    sol = solve_model(model, wanted, {**GIVEN, "concurrency": 1})
    v = sol.values  # base units
    args = (v["weights_per_gpu"], v["active_fraction"], v["expert_decay"], v["kv_per_token"], v["avg_context"],
            v["hbm_bandwidth"], v["active_params_per_gpu"], v["attention_flops"], v["peak_flops"],
            v["flops_fraction"], v["efficiency"], v["t_fixed"], v["gpus"])
    ours = sweep(model, {"concurrency": c}, GIVEN, ["tokens_per_s_per_gpu"])["tokens_per_s_per_gpu"]
    ref = _hand(c, *args)
    if not np.allclose(ours, ref, rtol=1e-9, atol=0):
        raise click.ClickException("the sweep and the hand-written formula disagree; not timing a wrong answer")
    t_ours, t_hand = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        sweep(model, {"concurrency": c}, GIVEN, ["tokens_per_s_per_gpu"])
        t1 = time.perf_counter()
        _hand(c, *args)
        t2 = time.perf_counter()
        t_ours.append(t1 - t0)
        t_hand.append(t2 - t1)
    ours_s, hand_s = statistics.median(t_ours), statistics.median(t_hand)
    click.echo(f"machine: {os.cpu_count()} core(s); {points:,} points; median of {runs} runs")
    click.echo(f"concur sweep         {ours_s * 1000:9.2f} ms  (target < 1000 ms: {'ok' if ours_s < 1 else 'MISSED'})")
    click.echo(f"hand-written numpy   {hand_s * 1000:9.2f} ms")
    verdict = "ok" if ours_s <= 2 * hand_s else "MISSED"
    click.echo(f"ratio                {ours_s / hand_s:9.2f} x  (target <= 2 x: {verdict}; "
               "the sweep also checks every value it computes)")
