"""``concur plan``: the cheapest configuration for a model, its traffic and its SLAs.

    $ concur plan --set model=llama-3.1-70b --set arrival_rate=50 --set input_tokens=1000 \\
        --set output_tokens=400 --set ttft_slo="2 s" --set itl_slo="50 ms"

Evaluates every catalog GPU x TP x (weight, KV) dtype x engine (:mod:`concur.analysis.fleet_plan`;
``--gpus``, ``--tp``, ``--layouts``, ``--weight-dtypes``, ``--kv-dtypes``, ``--engines`` narrow the axes;
an MoE model also gets expert-parallel layouts, shown in a ``layout`` column) priced at one
provider's list (``--provider NAME``, default the price catalog's; ``all`` compares providers) and prints
the feasible configurations cheapest first, then the rejected ones with their reason. ``--json``
prints ``{"candidates": [{"gpu", "tp", "weight_dtype", "kv_dtype", "engine", "provider", "replicas", "fleet_gpus",
"cost_per_month": {"value", "unit"}, "ttft": {...}, "itl": {...}, "feasible", "reason", ...}], "notes"}``;
``--csv FILE|-`` one row per candidate; ``--plot FILE.png`` the Pareto front of tokens/s per GPU against
tokens/s per user; ``--export FILE.xlsx`` a comparison sheet.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from ..options import json_option, pack_path_option, set_option

__all__ = ["command", "csv_text", "question_from", "table"]


def _names(values: tuple[str, ...]) -> list[str]:
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def _axes(
    gpus: tuple[str, ...],
    tps: tuple[str, ...],
    weights: tuple[str, ...],
    kvs: tuple[str, ...],
    engines: tuple[str, ...],
    provider: str | None = None,
    layouts: tuple[str, ...] = (),
    model: Any = None,
) -> dict[str, list[Any]] | None:
    """The grid the options narrow (:func:`concur.analysis.fleet_axes.narrow_axes`), or None for the
    default one; comma lists and repeated options are the same thing."""
    from ...analysis.fleet_axes import narrow_axes
    from ...errors import UsageError
    from ...lang.model import build_model

    if not (gpus or tps or weights or kvs or engines or provider or layouts):
        return None
    try:
        tp = [int(t) for t in _names(tps)]
    except ValueError:
        raise UsageError(f"--tp takes whole numbers, got {', '.join(tps)}", hint="e.g. --tp 1,2,4,8") from None
    narrow: dict[str, list[Any]] = {"gpus": _names(gpus), "tp": tp, "weight_dtypes": _names(weights)}
    narrow.update(kv_dtypes=_names(kvs), engines=_names(engines), layouts=_names(layouts))
    return narrow_axes(build_model(["llm_fleet"]), narrow, provider, model_id=model)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:,.1f} ms"


def _money(x: float | None) -> str:
    return "no price" if x is None else f"${x:,.0f}"


def table(result: Any, top: int | None, show_rejected: bool = False, verified: Any = None) -> list[str]:
    """The feasible candidates (cheapest first) and the rejected ones, as aligned text lines; with
    ``verified`` (config -> :class:`concur.analysis.verify.Verified`), a column of simulated p90s."""
    from ..render import printable

    verified = verified or {}

    feasible = result.feasible
    shown = feasible[:top] if top else feasible
    layout = any(c.config.ep > 1 or c.config.dp_attention > 1 or (c.nodes or 1) > 1 for c in shown)
    modes = any(c.mode == "disagg" for c in result.candidates)
    head = (["mode"] if modes else []) + _head(layout, bool(verified))
    rows = [head]
    for c in shown:
        rows.append(
            [
                *([c.mode] if modes else []),
                c.config.gpu,
                _layout_cell(c) if layout else _tp_cell(c),
                f"{c.config.weight_dtype}/{c.config.kv_dtype}",
                c.config.engine + ("+spec" if c.config.spec == "on" else ""),
                c.config.provider or "-",
                _workers_cell(c),
                str(c.fleet_gpus),
                _price_cell(c),
                _money(c.cost_per_month),
                "-" if c.cost_per_million_tokens is None else f"${c.cost_per_million_tokens:,.2f}",
                _ms(c.ttft),
                _ms(c.itl),
                f"{c.batch:,.0f}" if c.batch is not None else "-",
                c.binds,
            ]
        )
        if verified:
            rows[-1].append(_verified_cell(verified.get(c.config)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    left = {i + (1 if modes else 0) for i in (0, 2, 3, 4, 13, 14)} | ({0} if modes else set())
    lines = [
        ("  ".join(x.ljust(w) if i in left else x.rjust(w) for i, (x, w) in enumerate(zip(r, widths)))).rstrip()
        for r in rows
    ]
    if modes and feasible:
        lines[:0] = [*side_by_side(result), ""]
    if not feasible:
        lines = ["no configuration meets the question"]
    elif top and len(feasible) > top:
        lines.append(f"... {len(feasible) - top} more feasible (--top 0 shows all)")
    lines.extend(_rejected_lines(result, show_rejected))
    for note in result.notes:
        lines.append(f"note: {note}")
    lines.extend(_verified_notes(verified))
    return [printable(line) for line in lines]


def _rejected_lines(result: Any, show_rejected: bool) -> list[str]:
    """The rejected configurations grouped by GPU, TP and dtypes, each with its reasons (12 groups unless all)."""
    lines: list[str] = []
    rejected = [c for c in result.candidates if not c.feasible]
    if rejected:
        groups: dict[str, dict[str, list[str]]] = {}  # "gpu tpN w/kv" -> reason -> engines
        many = len({c.config.provider for c in result.candidates}) > 1
        for c in rejected:
            label = f"{c.config.gpu} {c.config.layout} {c.config.weight_dtype}/{c.config.kv_dtype}"
            label += (" spec" if c.config.spec == "on" else "") + (" disagg" if c.mode == "disagg" else "")
            label += f" prefill {c.config.prefill_gpu}" if c.config.prefill_gpu else ""
            label += f" at {c.config.provider}" if many else ""
            groups.setdefault(label, {}).setdefault(c.reason, []).append(c.config.engine)
        lines.append("")
        lines.append(f"rejected ({len(rejected)} configurations):")
        shown = list(groups.items()) if show_rejected else list(groups.items())[:12]
        for label, reasons in shown:
            if len(reasons) == 1:
                lines.append(f"  {label}: {next(iter(reasons))}")
            else:
                lines.append(
                    f"  {label}: " + "; ".join(f"{'/'.join(engines)}: {reason}" for reason, engines in reasons.items())
                )
        if len(shown) < len(groups):
            lines.append(f"  ... {len(groups) - len(shown)} more (--rejected lists them all; --json has every reason)")
    return lines


def _tp_cell(c: Any) -> str:
    """``4``; a disaggregated row ``P2/D4``, ``P1 b200/D2`` when its prefill pool runs on another GPU."""
    if c.mode != "disagg":
        return str(c.config.tp)
    on = f" {c.config.prefill_gpu}" if c.config.prefill_gpu else ""
    return f"P{c.prefill_tp}{on}/D{c.config.tp}"


def _price_cell(c: Any) -> str:
    """``$6.88`` per GPU-hour; ``$14.24/$6.88`` (prefill/decode) when the two pools' GPUs differ."""
    if c.gpu_hour_price is None:
        return "-"
    if c.config.prefill_gpu:  # "-": a prefill GPU without a list price (give prefill_gpu_hour_price)
        prefill = "-" if c.prefill_gpu_hour_price is None else f"${c.prefill_gpu_hour_price:,.2f}"
        return f"{prefill}/${c.gpu_hour_price:,.2f}"
    return f"${c.gpu_hour_price:,.2f}"


def _workers_cell(c: Any) -> str:
    return f"{c.prefill_workers}P+{c.replicas}D" if c.mode == "disagg" else str(c.replicas)


def side_by_side(result: Any) -> list[str]:
    """The cheapest feasible row of each serving mode, one column per mode (the xPyD split for disagg)."""
    best: dict[str, Any] = {}
    for c in result.feasible:
        best.setdefault(c.mode, c)
    fields: list[tuple[str, Any]] = [
        (
            "configuration",
            lambda c: (
                f"{c.config.gpu} {c.config.weight_dtype}/{c.config.kv_dtype} {c.config.engine}"
                + (" +spec" if c.config.spec == "on" else "")
            ),
        ),
        (
            "layout",
            lambda c: (
                f"{c.prefill_workers}P{c.replicas}D: prefill {c.prefill_workers} x TP{c.prefill_tp}"
                + (f" on {c.config.prefill_gpu}" if c.config.prefill_gpu else "")
                + f", decode {c.replicas} x TP{c.config.tp}"
                if c.mode == "disagg"
                else f"{c.replicas} x TP{c.config.tp}"
            ),
        ),
        ("GPUs", lambda c: str(c.fleet_gpus)),
        ("$/month", lambda c: _money(c.cost_per_month)),
        ("TTFT", lambda c: _ms(c.ttft)),
        ("ITL", lambda c: _ms(c.itl)),
    ]
    modes = [m for m in ("agg", "disagg") if m in best]
    table = [["cheapest per mode", *modes]] + [[name, *(cell(best[m]) for m in modes)] for name, cell in fields]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return ["  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in table]


def _head(layout: bool, verified: bool) -> list[str]:
    """The table's column titles: ``layout`` instead of ``tp`` when a row has an MoE layout or spans nodes."""
    head = ["gpu", "layout" if layout else "tp", "w/kv", "engine", "provider", "replicas", "GPUs", "$/GPU-h"]
    head += ["$/month", "$/M tok", "TTFT", "ITL", "batch", "binds"]
    return head + (["simulated p90 TTFT/ITL"] if verified else [])


def _layout_cell(c: Any) -> str:
    """``tp8 ep8 dpa8`` and, for a replica over more than one server, its nodes."""
    nodes = c.nodes or 1
    return str(c.config.layout) + (f" {nodes} nodes" if nodes > 1 else "")


def _verified_cell(v: Any) -> str:
    if v is None:
        return "-"
    from ...analysis.enginesim import seconds_text

    r = v.result
    if r is None:
        return "no end MISS"
    return f"{seconds_text(r.ttft.p90)} / {seconds_text(r.tpot.p90)} {'ok' if v.meets_sla else 'MISS'}"


def _verified_notes(verified: Any) -> list[str]:
    lines = []
    for config, v in verified.items():
        label = f"{config.gpu} {config.layout} {config.weight_dtype}/{config.kv_dtype} {config.engine}"
        label += f" (prefill on {config.prefill_gpu})" if getattr(config, "prefill_gpu", "") else ""
        what = "meets the SLAs" if v.meets_sla else "MISSES: " + "; ".join(v.misses)
        lines.append(
            f"verified {label}: {what} (engine simulation, {v.scheduler} scheduler, {v.requests:,} requests "
            f"after {v.warmup:,} warm-up, seed {v.seed})"
        )
    return lines


def _csv(result: Any, path: str) -> None:
    from ..streams import write_text

    write_text(path, csv_text(result))


_CSV_FIELDS = [
    "gpu",
    "tp",
    "weight_dtype",
    "kv_dtype",
    "engine",
    "provider",
    "feasible",
    "replicas",
    "fleet_gpus",
    "gpu_hour_price_usd",
    "cost_per_month_usd",
    "cost_per_million_tokens_usd",
    "ttft_ms",
    "itl_ms",
    "batch_per_replica",
    "per_replica_concurrency",
    "compute_utilization",
    "bandwidth_utilization",
    "binds",
    "reason",
    "mode",
    "spec",
    "prefill_tp",
    "prefill_workers",
    "ep",  # MoE layout columns last: a reader of the older columns is unaffected
    "dp_attention",
    "nodes",
]
"""``--csv``'s columns; ``prefill_gpu`` and ``prefill_gpu_hour_price_usd`` follow with ``--prefill-gpus``."""


def csv_text(result: Any) -> str:
    """``--csv``'s text: one row per candidate (``concur serve``'s plan download too)."""
    import csv
    import io

    from ...analysis.fleet_plan import rows
    from ..tabular import spreadsheet_text

    buf = io.StringIO()
    fields = list(_CSV_FIELDS)
    cross = any(c.config.prefill_gpu for c in result.candidates)
    if cross:  # --prefill-gpus: the prefill pool's GPU and price, last (a plan without the axis is unchanged)
        fields += ["prefill_gpu", "prefill_gpu_hour_price_usd"]
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(fields)
    text: Callable[[Any], Any] = lambda v: spreadsheet_text(v) if isinstance(v, str) else v
    value: Callable[[dict[str, Any] | None], str] = lambda q: "" if q is None else f"{q['value']:.6g}"
    for r in rows(result):
        cells = _csv_cells(r)
        if cross:
            cells += [
                r["prefill"]["gpu"] if "prefill" in r else "",
                value(r.get("prefill_gpu_hour_price", r["gpu_hour_price"])),
            ]
        out.writerow([text(c) for c in cells])
    return buf.getvalue()


def _csv_cells(r: dict[str, Any]) -> list[Any]:
    """One ``rows()`` row as the cells of :data:`_CSV_FIELDS`."""
    value: Callable[[dict[str, Any] | None], str] = lambda q: "" if q is None else f"{q['value']:.6g}"
    return [
        r["gpu"],
        r["tp"],
        r["weight_dtype"],
        r["kv_dtype"],
        r["engine"],
        r["provider"] or "",
        r["feasible"],
        r["replicas"] or "",
        r["fleet_gpus"] or "",
        value(r["gpu_hour_price"]),
        value(r["cost_per_month"]),
        value(r["cost_per_million_tokens"]),
        value(r["ttft"]),
        value(r["itl"]),
        "" if r["batch_per_replica"] is None else f"{r['batch_per_replica']:.6g}",
        "" if r["per_replica_concurrency"] is None else f"{r['per_replica_concurrency']:.6g}",
        "" if r["compute_utilization"] is None else f"{r['compute_utilization']:.4g}",
        "" if r["bandwidth_utilization"] is None else f"{r['bandwidth_utilization']:.4g}",
        r["binds"] or "",
        r["reason"],
        r["mode"],
        r["spec"],
        r["prefill"]["tp"] if "prefill" in r else "",
        r["prefill"]["workers"] if "prefill" in r else "",
        r["ep"],
        r["dp_attention"],
        r["nodes"] or "",
    ]


def question_from(sets: tuple[str, ...], scenario: str | None) -> tuple[dict[str, Any], list[str]]:
    """The plan's question from ``--scenario`` (a file, or ``default``: llm_fleet's embedded one, also
    used when nothing is given) and ``--set`` (which wins), less the plan's axes, with a note saying
    which axes the scenario named."""
    from ...analysis.fleet_plan import AXES
    from ..givens import default_scenario, load_scenario, parse_sets

    given: dict[str, Any] = {}
    notes = []
    if scenario == "default" or (not sets and not scenario):
        given = default_scenario(["llm_fleet"])
        notes.append("the question is llm_fleet's embedded scenario (--set NAME=VALUE changes it)")
    elif scenario:
        given = load_scenario(scenario)[0]
    dropped = [a for a in AXES if a in given]
    for a in dropped:
        del given[a]
    if dropped:
        notes.append(f"the scenario's {', '.join(dropped)} are axes the plan searches, not givens")
    given.update(parse_sets(sets))
    return given, notes


@click.command(name="plan")
@pack_path_option
@set_option(
    help="the question: model=, arrival_rate=, input_tokens=, output_tokens=, and optionally "
    "ttft_slo=, itl_slo=, utilization=, gpu_hour_price= (any llm_fleet variable)"
)
@click.option(
    "--scenario",
    metavar="FILE|-|default",
    help="start from a scenario file, or 'default' for llm_fleet's embedded one (used when no "
    "--set is given); its gpu, tp and dtypes are dropped: they are the plan's axes",
)
@click.option("--gpus", multiple=True, metavar="ID[,ID]", help="GPUs to try (default: every catalog GPU)")
@click.option(
    "--tp", "tps", multiple=True, metavar="N[,N]", help="tensor-parallel degrees (default: 1,2,4,8; MoE models also 16)"
)
@click.option(
    "--layouts",
    multiple=True,
    metavar="L[,L]",
    help="MoE layouts per TP: tp (experts tensor-parallel), ep (expert parallel, ep = tp), ep+dp (and "
    "data-parallel attention); default all three for an MoE model, tp for a dense one",
)
@click.option("--weight-dtypes", "weights", multiple=True, metavar="DT[,DT]", help="weight dtypes (default: bf16,fp8)")
@click.option("--kv-dtypes", "kvs", multiple=True, metavar="DT[,DT]", help="KV-cache dtypes (default: bf16,fp8)")
@click.option("--engines", multiple=True, metavar="ID[,ID]", help="engine presets (default: every engines entry)")
@click.option(
    "--provider",
    metavar="NAME|all",
    help="whose on-demand list prices to compare at (default: the price catalog's default, aws); "
    "'all' compares across providers, one row per provider",
)
@click.option(
    "--modes",
    default="agg",
    show_default=True,
    metavar="agg[,disagg]",
    help="serving modes to compare: agg (one replica serves prompts and decodes), disagg (a prefill pool and a "
    "decode pool joined by a KV link: --set kv_link=ID, default ib-ndr-400g; --set prefill_tp=N fixes its TP)",
)
@click.option(
    "--prefill-gpus",
    "prefill_gpus",
    multiple=True,
    metavar="ID[,ID]",
    help="with --modes disagg: run each disaggregated row's prefill pool on each of these GPUs (the decode pool "
    "stays on the row's --gpus GPU; each pool priced at its own GPU's price: --set gpu_hour_price is the decode "
    "GPU's, --set prefill_gpu_hour_price another prefill GPU type's, else its list price); default: the row's own GPU",
)
@click.option(
    "--spec",
    default="off",
    show_default=True,
    metavar="off[,on]",
    help="speculative decoding as a plan axis: on = one MTP/EAGLE-style draft token per step at the acceptance "
    "catalogs/speculators.yaml cites (--set acceptance_rate=... is refused with it: plan your own with --set alone)",
)
@click.option(
    "--top", type=click.IntRange(0), default=15, show_default=True, help="feasible rows shown in the table (0: all)"
)
@click.option("--rejected", "show_rejected", is_flag=True, help="list every rejected configuration and why")
@click.option("--csv", "csv_path", metavar="FILE|-", help="one row per candidate ('-': stdout)")
@click.option("--plot", "plot_path", metavar="FILE.png", help="Pareto front: tokens/s per GPU vs tokens/s per user")
@click.option("--export", "export_path", metavar="FILE.xlsx", help="a comparison workbook (needs concur[excel])")
@click.option(
    "--verify",
    type=click.IntRange(0),
    default=0,
    metavar="N",
    help="simulate the N (at most 20) cheapest feasible rows step by step (concur simulate --model engine) and mark those "
    "whose simulated latencies miss the SLAs (ttft_slo/itl_slo on means; ttft_p90_slo, itl_p90_slo, "
    "ttft_p99_slo, itl_p99_slo on percentiles)",
)
@json_option
def command(
    sets: tuple[str, ...],
    scenario: str | None,
    gpus: tuple[str, ...],
    tps: tuple[str, ...],
    layouts: tuple[str, ...],
    weights: tuple[str, ...],
    kvs: tuple[str, ...],
    engines: tuple[str, ...],
    provider: str | None,
    top: int,
    show_rejected: bool,
    csv_path: str | None,
    plot_path: str | None,
    export_path: str | None,
    verify: int,
    as_json: bool,
    modes: str = "agg",
    spec: str = "off",
    prefill_gpus: tuple[str, ...] = (),
) -> None:
    """The cheapest GPU, TP, precision and engine for a model, its traffic and its SLAs.

    Every configuration is sized by the llm_fleet pack (replicas from the KV pool, the engine's batch
    cap, the decode step at the fleet's batch and the SLAs); the cheapest are re-solved by the
    scalar solver. Rejected configurations say why (does not fit, SLA out of reach, TP).
    """
    from ...analysis.fleet_plan import plan_fleet, rows
    from ..progress import progress
    from ..render import echo

    question, notes = question_from(sets, scenario)
    question, percentile_slos = _percentile_slos(question, verify)
    axes = _axes(gpus, tps, weights, kvs, engines, provider, layouts, question.get("model"))
    if _names((spec,)) != ["off"]:
        from ...analysis.fleet_plan import default_axes
        from ...lang.model import build_model

        axes = axes or default_axes(build_model(["llm_fleet"]), question)
        axes["spec"] = _names((spec,))
    mode_names = tuple(_names((modes,)))
    prefill = _prefill_gpus(prefill_gpus, mode_names)
    with progress("sizing configurations") as bar:
        result = plan_fleet(question, axes, progress=bar.update, modes=mode_names, prefill_gpus=prefill)
    result.notes[:0] = notes
    if csv_path:
        _csv(result, csv_path)
    if plot_path:
        from ...analysis.plot import pareto_plan

        pareto_plan(result, plot_path)
    if export_path:
        from ...excel.plan_sheet import export_plan

        export_plan(result, export_path)
    if not result.feasible:  # after --csv and --export: the files hold every reason
        from ...analysis.fleet_plan import why_none
        from ...errors import InfeasibleError

        raise InfeasibleError(
            why_none(result),
            hint="larger or more GPUs (--gpus, --tp), fp8 weights, or a looser "
            "SLA; --csv FILE lists every configuration and its reason",
        )
    verified: dict[Any, Any] = {}
    if verify:
        from ...analysis.verify import slo_values, verify_plan

        with progress("simulating the cheapest rows"):
            verified = verify_plan(result, verify, slo_values({**question, **percentile_slos}))
    if as_json:
        out = list(rows(result))
        for cand, row in zip(result.candidates, out):
            if cand.config in verified:
                row["verified"] = verified[cand.config].as_dict()
        click.echo(json.dumps({"candidates": out, "notes": result.notes}, indent=2))
    elif csv_path != "-":
        echo("\n".join(table(result, top or None, show_rejected, verified)))


def _prefill_gpus(values: tuple[str, ...], modes: tuple[str, ...]) -> list[str]:
    """``--prefill-gpus``' ids (checked by the plan against the gpus catalog); refused without disagg rows."""
    from ...errors import UsageError

    names = _names(values)
    if names and "disagg" not in modes:
        raise UsageError(
            "--prefill-gpus places the prefill pool of disaggregated rows, and the plan has none",
            hint="add --modes agg,disagg (or --modes disagg)",
        )
    return names


def _percentile_slos(question: dict[str, Any], verify: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The question less the percentile SLOs the fleet pack does not declare (only the simulation
    checks them, so they need --verify), and those SLOs; ``verify`` is checked here, before the plan."""
    from ...analysis.verify import split_percentile_slos, verify_count
    from ...errors import UsageError
    from ...lang.model import build_model

    verify_count(verify)  # before the plan: a count past the limit is refused at once
    rest, pulled = split_percentile_slos(question, set(build_model(["llm_fleet"]).variables))
    if pulled and not verify:
        raise UsageError(
            f"{', '.join(pulled)} is checked on simulated percentiles",
            hint="add --verify N to simulate the N cheapest rows",
        )
    return rest, pulled
