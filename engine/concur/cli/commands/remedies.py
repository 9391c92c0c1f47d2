"""``concur remedies``: the six T3 remedies for a full KV pool, ranked by cost, each re-solved.

    $ concur remedies --set model=llama-3.1-70b --set gpu=h100-sxm-80gb --set tp=4 \\
        --set context=8192 --real-context 4096 --shared-prefix 2048

The logic is :func:`concur.analysis.remedies.remedies`; this module parses and renders.
"""

from __future__ import annotations

import json

import click

from ..options import json_option, set_option

__all__ = ["command"]


def _num(x: float | None, digits: str = ",.0f") -> str:
    return "-" if x is None else format(x, digits)


@click.command(name="remedies")
@set_option(help="the scenario (llm_memory givens; input_tokens/output_tokens add throughput)")
@click.option("--real-context", type=float, help="tokens a request really holds (prompt + output), token")
@click.option("--shared-prefix", type=float, help="tokens every request shares (system prompt), token")
@click.option(
    "--mem-util",
    "mem_util",
    type=float,
    default=0.95,
    show_default=True,
    help="the memory utilization remedy 3 raises to",
)
@click.option("--larger-gpu", help="GPU id for remedy 6b (default: the next larger in the catalog)")
@json_option
def command(
    sets: tuple[str, ...],
    real_context: float | None,
    shared_prefix: float | None,
    mem_util: float,
    larger_gpu: str | None,
    as_json: bool,
) -> None:
    """Rank the remedies for a capacity-bound server, cheapest first, with the users each buys.

    Every number is the scenario re-solved with one change applied; a remedy that does not
    apply says why. Throughput (decode tok/s at concurrency = users) appears when
    input_tokens and output_tokens are set.
    """
    from ...analysis.remedies import remedies
    from ...errors import UsageError
    from ..givens import parse_sets

    given = parse_sets(sets)
    if not 0 < mem_util <= 1:
        raise UsageError(f"--mem-util must lie in (0, 1], got {mem_util:g}")
    base, rows = remedies(
        given, real_context=real_context, shared_prefix=shared_prefix, mem_util=mem_util, larger_gpu=larger_gpu
    )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "baseline": {**base.__dict__, "users_per_gpu": base.users_per_gpu},
                    "remedies": [r.to_json(base) for r in rows],
                },
                indent=2,
            )
        )
        return
    tput = base.tokens_per_s is not None
    click.echo(
        f"baseline: {base.users} users on {base.gpus} GPU(s) ({base.users_per_gpu:.2f} per GPU)"
        + (f", {_num(base.tokens_per_s)} tok/s served" if tput else "")
    )
    table: list[list[str]] = [["#", "remedy", "users", "gain", "per GPU"] + (["tok/s"] if tput else []) + ["cost"]]
    notes: list[str] = []
    for r in rows:
        if r.result is None:
            table.append([str(r.rank), r.name, "-", "-", "-"] + (["-"] if tput else []) + [r.cost])
            notes.append(f"{r.rank} {r.name}: not applied: {r.reason}")
            continue
        res = r.result
        table.append(
            [str(r.rank), r.name, str(res.users), f"{res.users - base.users:+d}", f"{res.users_per_gpu:.2f}"]
            + ([_num(res.tokens_per_s)] if tput else [])
            + [r.cost]
        )
        notes.append(f"{r.rank} {r.name}: {r.caveat}")
    widths = [max(len(t[i]) for t in table) for i in range(len(table[0]))]
    left = {1, len(widths) - 1}
    for t in table:
        click.echo(
            "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(t, widths))).rstrip()
        )
    click.echo("caveats:")
    for n in notes:
        click.echo(f"  {n}")
