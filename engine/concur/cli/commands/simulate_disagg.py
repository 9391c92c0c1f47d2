"""``concur simulate --model engine --mode disagg``: a disaggregated fleet, step by step.

    $ concur simulate --model engine --mode disagg --prefill-workers 1 --decode-workers 2 \\
        --kv-link ib-ndr-400g --set model=llama-3.1-70b --set gpu=h100-sxm-80gb --set tp=4 \\
        --set engine=vllm --set input_tokens=1000 --set output_tokens=400 --rate 5

The configuration (model, dtypes, engine, lengths, speculation) comes from ``--set`` as for the
aggregated engine; each pool takes ``--set``'s gpu and tp unless ``--prefill-gpu/--prefill-tp``
or ``--decode-gpu/--decode-tp`` say otherwise (``--set prefill_gpu=ID``, llm_disagg's name, is the
prefill pool's gpu too). The link is a catalog id (``--kv-link``, the
``links`` catalog) or ``--link-bandwidth`` (per GPU and direction; a bare number is GB/s) with
``--link-latency`` (a bare number is us). Every refusal of a layout is one error line (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

__all__ = ["DISAGG_FLAGS", "check_layout", "link_of", "run_disagg"]

# option name -> the flag a user typed; only --mode disagg takes them
DISAGG_FLAGS = {
    "prefill_workers": "--prefill-workers",
    "decode_workers": "--decode-workers",
    "prefill_gpu": "--prefill-gpu",
    "prefill_tp": "--prefill-tp",
    "decode_gpu": "--decode-gpu",
    "decode_tp": "--decode-tp",
    "kv_link": "--kv-link",
    "link_bandwidth": "--link-bandwidth",
    "link_latency": "--link-latency",
}


def check_layout(mode: str, layout: Mapping[str, Any], replicas: int, scheduler: str | None) -> None:
    """Refuse a layout that cannot run, with one line saying what to give."""
    from ...errors import UsageError

    given = [DISAGG_FLAGS[k] for k, v in layout.items() if v is not None]
    if mode != "disagg":
        if given:
            raise UsageError(f"{', '.join(given)} describe a disaggregated fleet", hint="add --mode disagg")
        return
    missing = [DISAGG_FLAGS[k] for k in ("prefill_workers", "decode_workers") if layout.get(k) is None]
    if missing:
        raise UsageError(
            f"--mode disagg needs {' and '.join(missing)}", hint="e.g. --prefill-workers 1 --decode-workers 2"
        )
    if replicas != 1:
        raise UsageError(
            "--replicas sizes an aggregated fleet",
            hint="with --mode disagg give --prefill-workers and --decode-workers",
        )
    if scheduler is not None:
        raise UsageError(
            "--scheduler picks an aggregated replica's scheduler",
            hint="prefill and decode workers schedule their own phase",
        )
    named, bw, lat = layout.get("kv_link"), layout.get("link_bandwidth"), layout.get("link_latency")
    if named is None and bw is None and lat is None:
        raise UsageError(
            "a prefill pool needs a link to the decode pool",
            hint="--kv-link ID (the links catalog) or --link-bandwidth and --link-latency",
        )
    if named is not None and (bw is not None or lat is not None):
        raise UsageError(
            "--kv-link names a link; --link-bandwidth/--link-latency describe one", hint="give one or the other"
        )
    if named is None and (bw is None or lat is None):
        raise UsageError(
            f"{'--link-latency' if bw is not None else '--link-bandwidth'} is missing",
            hint="give both, or --kv-link ID",
        )


def _quantity(text: str, unit: str, flag: str) -> float:
    """``text`` ("50 GB/s", or a bare number in ``unit``) in the base unit of ``unit``."""
    from ...errors import ConcurError, UsageError
    from ...lang.units import parse_quantity, unit_info

    want = unit_info(unit)
    try:
        number, info = parse_quantity(text, variable=flag)
    except (ValueError, ConcurError) as exc:
        raise UsageError(f"{flag}: {exc}", hint=f"e.g. {flag} '10 {unit}'") from None
    if info.text == "":
        info = want
    if info.dims != want.dims:
        raise UsageError(
            f"{flag}: '{text}' is not a {'bandwidth' if '/' in unit else 'time'}", hint=f"e.g. {flag} '10 {unit}'"
        )
    return number * info.factor


def link_of(layout: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The :class:`KVLink` (bytes/s per GPU, s) the layout names, and how to print it."""
    from ...analysis.enginesim_disagg import KVLink, catalog_link
    from ...lang.units import unit_info

    per_byte = unit_info("B/s").factor
    name = layout.get("kv_link")
    if name is None:
        bw = _quantity(str(layout["link_bandwidth"]), "GB/s", "--link-bandwidth") / per_byte
        lat = _quantity(str(layout["link_latency"]), "us", "--link-latency")
        link = KVLink(bw, lat)
    else:
        link = catalog_link(str(name))
        bw, lat = link.bandwidth, link.latency
    return link, {
        "id": name,
        "bandwidth": {"value": bw / 1e9, "unit": "GB/s"},
        "latency": {"value": lat * 1e6, "unit": "us"},
    }


def run_disagg(
    sets: tuple[str, ...],
    load_args: tuple[Any, ...],
    layout: Mapping[str, Any],
    token_budget: int | None,
    max_num_seqs: int | None,
    max_events: int,
    seed: int,
    as_json: bool,
) -> None:
    """Solve both pools, run the disaggregated simulation and print it. ``load_args``: rate, concurrency,
    trace, burstiness, requests, warmup (as ``concur simulate`` takes them)."""
    from ...analysis.enginesim import sla_misses
    from ...analysis.enginesim_disagg import simulate_disagg, solve_pools
    from ..progress import progress
    from .simulate_engine import engine_load, engine_question, limits_dict, with_slo

    rate, concurrency, trace, burstiness, requests, warmup = load_args
    config, slo, recorded = engine_question(sets, rate, concurrency, trace)
    link, link_doc = link_of(layout)
    sides = [
        {"gpu": layout.get(f"{s}_gpu"), "tp": layout.get(f"{s}_tp"), "workers": layout[f"{s}_workers"]}
        for s in ("prefill", "decode")
    ]
    p, d, kv_bytes, values = solve_pools(
        config, sides[0], sides[1], token_budget=token_budget, max_num_seqs=max_num_seqs
    )
    inp, out = round(values["input_tokens"]), round(values["output_tokens"])
    source, count, warm, load = engine_load(
        recorded, trace, rate, concurrency, burstiness, requests, warmup, seed, inp, out
    )
    with progress("simulating"):
        res = simulate_disagg(
            p, d, link, source, kv_bytes=kv_bytes, requests=count, warmup=warm, concurrency=concurrency,
            max_events=max_events, seed=seed,
        )  # fmt: skip
    misses = sla_misses(res, slo) if slo else []
    pools = {
        name: {
            "gpu": side["gpu"] or (name == "prefill" and config.get("prefill_gpu")) or config.get("gpu"),
            "tp": pool.tp,
            "workers": pool.workers,
            "limits": limits_dict(pool.limits),
        }
        for name, side, pool in (("prefill", sides[0], p), ("decode", sides[1], d))
    }
    if as_json:
        doc = res.as_dict()
        doc.update(load=load, seed=seed, warmup=warm, mode="disagg", **pools, link=link_doc)
        doc["kv_bytes_per_token"] = kv_bytes
        click.echo(json.dumps(with_slo(doc, slo, misses), indent=2))
        return
    for line in _lines(res, pools, link_doc, load, count, warm, seed, inp, out, slo, misses):
        click.echo(line)


def _lines(
    res: Any,
    pools: dict[str, Any],
    link: dict[str, Any],
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
    from .simulate_engine import percentile_lines, queue_line, sla_lines, speculation_lines, throughput_line

    p, d, x = pools["prefill"], pools["decode"], res.disagg
    where = link["id"] or "as given"
    lines = [
        f"engine simulation: disaggregated, {p['workers']} prefill worker(s) ({p['gpu']}, tp {p['tp']}) + "
        f"{d['workers']} decode worker(s) ({d['gpu']}, tp {d['tp']}); KV link {where}: "
        f"{link['bandwidth']['value']:,.4g} GB/s per GPU, {link['latency']['value']:,.3g} us",
        f"load: {load}; {inp:,} in / {out:,} out; {count:,} requests recorded after {warm:,} warm-up, seed {seed}",
    ]
    rows = (
        ("TTFT", res.ttft),
        ("ITL (TPOT)", res.tpot),
        ("inter-token gap", res.itl_gap),
        ("KV transfer", x.transfer),
        ("KV hand-off", x.handoff),
    )
    lines += [*percentile_lines(rows), throughput_line(res)]
    lines.append(
        f"pools             prefill steps of {x.prefill_batch:,.0f} prompt tokens on average; decode batch "
        f"{res.mean_decode_batch:,.1f}; busiest link {x.link_utilization:.1%} busy"
    )
    lines += [*speculation_lines(res), queue_line(res)]
    lines.append(f"steps             {res.steps:,} ({res.events:,} events), {t(res.simulated_time)} simulated")
    lines += sla_lines(slo, misses)
    return lines
