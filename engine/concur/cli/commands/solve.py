"""``concur solve``: the packs solved for the ``--find`` variables, as a table or one JSON object.

    $ concur solve --find users --set model=llama-3.1-70b --set gpu=h100-sxm-80gb --set tp=8 \\
        --set context="8192 token"

The question is assembled by :func:`concur.cli.givens.solve_question` (also used by ``export``)
and shown by :func:`concur.cli.render.render_table`; ``--json`` prints the solution's
``to_json()``: ``{"results": {NAME: {"value", "unit"}}, "given": {...}, "trace": [...]}``.
"""

from __future__ import annotations

import json

import click

from ..options import find_option, json_option, pack_path_option, set_option

__all__ = ["command"]


@click.command(name="solve")
@pack_path_option
@click.argument("packs", nargs=-1)
@find_option()
@set_option()
@click.option(
    "--scenario",
    metavar="FILE|-|default",
    help="YAML file with given: {NAME: VALUE} ('-': stdin), or 'default' for the packs' embedded "
    "scenario (then --set overrides it)",
)
@json_option
@click.option("--explain", is_flag=True, help="print the whole derivation")
def command(
    packs: tuple[str, ...],
    find: tuple[str, ...],
    sets: tuple[str, ...],
    scenario: str | None,
    as_json: bool,
    explain: bool,
) -> None:
    """Solve the packs for the --find variables from the givens.

    Without PACK, the smallest shipped pack declaring every target is used.
    With no --set and no --scenario, the packs' embedded default scenario is solved;
    --scenario default starts from it and lets --set change some of its values.
    """
    from ..answers import answered, question_key
    from ..render import echo, render_table

    def solved() -> str:
        from ..givens import solve_question  # only when not remembered: it imports the solver

        sol = solve_question(packs, find, sets, scenario, default_find=("users",))
        return json.dumps(sol.to_json(), indent=2) if as_json else render_table(sol, explain)

    # the same question on unchanged files: the answer printed before, without solving
    text = answered(question_key(packs, find, sets, scenario, as_json, explain), solved)
    if as_json:
        click.echo(text)  # json escapes control characters itself
    else:
        echo(text)
