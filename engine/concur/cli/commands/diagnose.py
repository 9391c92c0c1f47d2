"""``concur diagnose``: a measured throughput against the bound, and what binds.

The diagnosis itself is :func:`concur.analysis.diagnose.diagnose` (its module essay says how it
is designed); this command reads ``--set`` and the measurement, and prints the report.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from ..options import json_option, set_option

__all__ = ["command"]


@click.command(name="diagnose")
@set_option(help="the scenario: concurrency, input_tokens, output_tokens, model/gpu/tp/dtypes")
@click.option("--measured-tokens-per-s", type=float, help="measured decode output of the replica, token/s")
@click.option("--measured-itl", type=float, help="measured inter-token latency, ms")
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    sets: tuple[str, ...],
    measured_tokens_per_s: float | None,
    measured_itl: float | None,
    as_json: bool,
) -> None:
    """Measured ÷ bound, which bound binds, and the 'KV pool full with idle compute' signature.

    Exit 1 when the measurement beats the roofline (the inputs or the physics are wrong); with
    --json the diagnosis object then carries that error under "error" (one JSON document).
    """
    from ...analysis.diagnose import diagnose
    from ...errors import ContradictionError
    from ..givens import parse_sets
    from ..report import error_document

    d = diagnose(parse_sets(sets), measured_tokens_per_s, measured_itl)
    beyond = None
    if d.ratio_to_bound > 1 + 1e-9:
        beyond = ContradictionError(
            f"measured {d.measured_tokens_per_s:,.0f} token/s exceeds the roofline bound "
            f"{d.bound_tokens_per_s:,.0f} token/s",
            hint=d.advice,
        )
    if as_json:
        doc = asdict(d)
        if beyond is not None:
            doc.update(error_document(beyond))
        click.echo(json.dumps(doc, indent=2))
        if beyond is not None:
            ctx.exit(beyond.exit_code)
        return
    rows = [
        ("measured", f"{d.measured_tokens_per_s:,.0f} token/s at concurrency {d.concurrency:g}"),
        ("bound (roofline)", f"{d.bound_tokens_per_s:,.0f} token/s"),
        ("measured / bound", f"{d.ratio_to_bound:.2f}"),
        (
            "model",
            (
                f"{d.model_tokens_per_s:,.0f} token/s (efficiency {d.efficiency:g}, "
                f"t_fixed {d.fixed_ms:g} ms); measured / model {d.ratio_to_model:.2f}"
            ),
        ),
        ("step terms", (f"memory {d.memory_ms:.3g} ms, compute {d.compute_ms:.3g} ms, fixed {d.fixed_ms:.3g} ms")),
        ("KV limit", f"{d.kv_limit:,.0f} sequences of input + output tokens"),
        ("binds", d.binds),
    ]
    if d.signature:
        rows.append(("signature", d.signature))
    rows.append(("advice", d.advice))
    w = max(len(a) for a, _ in rows)
    for a, b in rows:
        click.echo(f"{a:<{w}}  {b}")
    if beyond is not None:
        raise beyond
