"""``concur simulate --model engine``: the engine-level simulator behind the simulate command.

    $ concur simulate --model engine --set model=llama-3.1-8b --set gpu=h100-sxm-80gb --set engine=vllm \\
        --set input_tokens=1000 --set output_tokens=400 --rate 10 --requests 2000

The configuration comes from ``--set`` (the fleet pack's names: model, gpu, tp, dtypes, engine,
input and output tokens); SLOs given there (``ttft_slo``, ``itl_slo``, ``ttft_p90_slo``, ...) are
checked on the simulated latencies. The load is one of ``--rate`` (open loop; ``--burstiness``
below 1 for clumps), ``--concurrency`` (closed loop) or ``--trace FILE`` (CSV or JSONL).
"""

from __future__ import annotations

import json
import math
from typing import Any

import click

__all__ = ["engine_load", "engine_question", "limits_dict", "run_engine", "with_slo"]


def run_engine(
    sets: tuple[str, ...],
    rate: float | None,
    concurrency: int | None,
    trace: str | None,
    burstiness: float,
    requests: int | None,
    warmup: int | None,
    replicas: int,
    scheduler: str | None,
    token_budget: int | None,
    max_num_seqs: int | None,
    max_events: int,
    seed: int,
    as_json: bool,
) -> None:
    """Solve the configuration, run the engine simulation and print it (see the module docstring)."""
    from ...analysis.enginesim import simulate_engine, sla_misses
    from ...analysis.step_model import solve_engine
    from ..progress import progress

    config, slo, recorded = engine_question(sets, rate, concurrency, trace)
    mixed = None if scheduler is None else scheduler == "mixed"
    step, limits, values = solve_engine(config, mixed=mixed, token_budget=token_budget, max_num_seqs=max_num_seqs)
    inp, out = round(values["input_tokens"]), round(values["output_tokens"])
    source, count, warm, load = engine_load(
        recorded, trace, rate, concurrency, burstiness, requests, warmup, seed, inp, out
    )
    with progress("simulating"):
        res = simulate_engine(
            step,
            limits,
            source,
            requests=count,
            warmup=warm,
            replicas=replicas,
            concurrency=concurrency,
            max_events=max_events,
            seed=seed,
        )
    misses = sla_misses(res, slo) if slo else []
    notes = [] if "engine" in config else [_no_engine_note(res.engine, limits.token_budget)]
    if as_json:
        doc = res.as_dict()
        doc.update(load=load, seed=seed, warmup=warm, limits=limits_dict(limits), notes=notes)
        click.echo(json.dumps(with_slo(doc, slo, misses), indent=2))
        return
    for line in _table(res, limits, load, count, warm, seed, inp, out, slo, misses):
        click.echo(line)
    for note in notes:
        click.echo(f"note: {note}")


def _no_engine_note(scheduler: str, budget: int) -> str:
    """What a simulation without ``engine=`` took: the packs' defaults (the engines catalog's default entry)."""
    return (
        f"assumed engine = default: the packs' engine-agnostic constants, a {scheduler} scheduler and a token "
        f"budget of {budget:,} (give --set engine=vllm, sglang or trtllm to simulate one)"
    )


def engine_question(
    sets: tuple[str, ...], rate: float | None, concurrency: int | None, trace: str | None
) -> tuple[dict[str, Any], dict[str, float], Any]:
    """The configuration and SLOs of ``--set`` (lengths defaulting to a trace's longest), and the trace;
    exactly one load must be given."""
    from ...analysis.arrivals import read_trace
    from ...analysis.enginesim import SLO_NAMES
    from ...analysis.verify import slo_values
    from ...errors import UsageError
    from ..givens import parse_sets

    loads = [
        name for name, v in (("--rate", rate), ("--concurrency", concurrency), ("--trace", trace)) if v is not None
    ]
    if len(loads) != 1:
        raise UsageError(
            "the engine model needs exactly one load: --rate R (open loop), --concurrency C (closed loop) "
            "or --trace FILE" + (f"; got {', '.join(loads)}" if loads else ""),
        )
    given = parse_sets(sets)
    slo = slo_values({k: v for k, v in given.items() if k in SLO_NAMES})
    config = {k: v for k, v in given.items() if k not in SLO_NAMES}
    recorded = read_trace(trace) if trace is not None else None
    if recorded is not None:
        config.setdefault("input_tokens", max(recorded.inputs))
        config.setdefault("output_tokens", max(recorded.outputs))
    return config, slo, recorded


def engine_load(
    recorded: Any,
    trace: str | None,
    rate: float | None,
    concurrency: int | None,
    burstiness: float,
    requests: int | None,
    warmup: int | None,
    seed: int,
    inp: int,
    out: int,
) -> tuple[Any, int, int, str]:
    """The request stream, the recorded and warm-up counts, and the load in words."""
    from ...analysis.arrivals import Synthetic
    from ...errors import UsageError

    if recorded is not None:
        warm = 0 if warmup is None else warmup
        count = len(recorded) - warm if requests is None else requests
        if count < 1 or warm + count > len(recorded):
            raise UsageError(
                f"the trace holds {len(recorded):,} requests, fewer than --warmup-requests {warm:,} + --requests "
                f"{count:,}",
                hint="ask for fewer requests",
            )
        return recorded, count, warm, f"trace {trace}: {len(recorded):,} requests"
    count = 2000 if requests is None else requests
    warm = count // 4 if warmup is None else warmup
    # a closed loop (the only load without a rate here) draws only the lengths: its clients set the pace
    pace = 1.0 if rate is None else rate
    source = Synthetic(pace, max(inp, 1), max(out, 1), burstiness=burstiness, seed=seed)
    if concurrency is not None:
        return source, count, warm, f"closed loop, {concurrency} clients"
    kind = "Poisson" if burstiness == 1 else f"Gamma gaps, burstiness {burstiness:g}"
    return source, count, warm, f"open loop, {kind}, {rate:g} request/s"


def limits_dict(limits: Any) -> dict[str, int]:
    return {
        "kv_blocks": limits.kv_blocks,
        "block_size": limits.block_size,
        "max_num_seqs": limits.max_num_seqs,
        "token_budget": limits.token_budget,
    }


def with_slo(doc: dict[str, Any], slo: dict[str, float], misses: list[str]) -> dict[str, Any]:
    if slo:
        doc["slo"] = {k: {"value": v * 1e3, "unit": "ms"} for k, v in slo.items()}
        doc["meets_sla"] = not misses
        doc["misses"] = misses
    return doc


def percentile_lines(rows: Any) -> list[str]:
    """The percentile table of an engine simulation: a header, then mean/p50/p90/p99 per ``(name, Percentiles)``."""
    from ...analysis.enginesim import seconds_text as t

    lines = [f"{'':18}{'mean':>11}{'p50':>11}{'p90':>11}{'p99':>11}"]
    for name, q in rows:
        lines.append(f"{name:18}" + "".join(f"{t(v):>11}" for v in (q.mean, q.p50, q.p90, q.p99)))
    return lines


def throughput_line(res: Any) -> str:
    return f"throughput        {res.output_tokens_per_s:,.0f} output token/s, {res.requests_per_s:,.3g} request/s"


def speculation_lines(res: Any) -> list[str]:
    """The drawn acceptance length of a speculative run (none without speculation)."""
    if math.isnan(res.spec_tokens_per_step):
        return []
    return [f"speculation       {res.spec_tokens_per_step:.3g} tokens per sequence and decode step (drawn)"]


def queue_line(res: Any) -> str:
    verdict = "stable" if res.stable else "UNSTABLE: the queue grows"
    return (
        f"waiting queue     {res.queue_first_half:,.1f} then {res.queue_second_half:,.1f} requests (time averages "
        f"over the two halves; max {res.queue_max:,}): {verdict}"
    )


def sla_lines(slo: dict[str, float], misses: list[str]) -> list[str]:
    """The SLA verdict (none without targets)."""
    from ...analysis.enginesim import seconds_text as t

    if not slo:
        return []
    ok = "met (" + ", ".join(f"{k} {t(v)}" for k, v in slo.items()) + ")"
    return ["SLA: " + (ok if not misses else "MISSED: " + "; ".join(misses))]


def _table(
    res: Any,
    limits: Any,
    load: str,
    count: int,
    warm: int,
    seed: int,
    inp: int,
    out: int,
    slo: dict[str, float],
    misses: list[str],
) -> list[str]:
    from ...analysis.enginesim import seconds_text as t

    lines = [
        f"engine simulation: {res.engine} scheduler, {res.replicas} replica(s); token budget {limits.token_budget:,}, "
        f"max_num_seqs {limits.max_num_seqs:,}, KV {limits.kv_tokens:,} tokens ({limits.kv_blocks:,} blocks of "
        f"{limits.block_size})",
        f"load: {load}; {inp:,} in / {out:,} out; {count:,} requests recorded after {warm:,} warm-up, seed {seed}",
    ]
    lines += percentile_lines((("TTFT", res.ttft), ("ITL (TPOT)", res.tpot), ("inter-token gap", res.itl_gap)))
    lines += [throughput_line(res), *speculation_lines(res), queue_line(res)]
    lines.append(
        f"steps             {res.steps:,} ({res.events:,} events), mean decode batch {res.mean_decode_batch:,.1f}, "
        f"{res.preemptions:,} preemptions, {t(res.simulated_time)} simulated"
    )
    lines += sla_lines(slo, misses)
    return lines
