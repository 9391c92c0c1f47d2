"""Notebooks: a Solution and a plan render as HTML tables (``_repr_html_``) holding the same answers,
with every pack text escaped."""

from __future__ import annotations

import re
from html import unescape

import concur
from concur.analysis.fleet_plan import plan_fleet
from concur.solver.html import html_table

FLEET = {"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb", "tp": 4, "arrival_rate": 50, "input_tokens": 1000}


def _cells(html: str) -> list[list[str]]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [[unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)] for row in re.findall(r"<tr>(.*?)</tr>", body)]


def test_a_solution_is_a_table_of_its_results_units_and_equations():
    sol = concur.solve("replicas,cost_per_month", {**FLEET, "output_tokens": 400}, "llm_fleet")
    html = sol._repr_html_()
    rows = {r[0]: r for r in _cells(html)}
    assert set(rows) == {"replicas", "cost_per_month"}
    assert rows["replicas"][1] == f"{int(sol.value('replicas'))} replica"
    assert rows["cost_per_month"][2].startswith("cost_per_month = ")
    assert "[formulas/cost.yaml:" in rows["cost_per_month"][2]
    for note in sol.notes:
        assert f"<li>note: {note.replace(chr(39), '&#x27;')}</li>" in html


def test_a_plan_is_a_table_cheapest_first_with_the_rejected_counted():
    axes = {"gpu": ["h100-sxm-80gb", "l4"], "tp": [1, 4], "dtypes": [("bf16", "bf16")], "engine": ["vllm"]}
    question = {k: v for k, v in FLEET.items() if k not in ("gpu", "tp")} | {"output_tokens": 400}
    result = plan_fleet(question, axes)
    html = result._repr_html_()
    rows = _cells(html)
    assert [(r[0], r[1], r[4]) for r in rows] == [
        (c.config.gpu, str(c.config.tp), str(c.replicas)) for c in result.feasible
    ]
    rejected = sum(1 for c in result.candidates if not c.feasible)
    counted = sum(int(n) for n in re.findall(r"<li>rejected \((\d+)\):", html))
    assert rejected and counted == rejected


def test_every_cell_and_note_is_escaped():
    html = html_table(["<b>"], [["<script>alert(1)</script>"]], caption="a & b", notes=["<img src=x>"])
    assert "<script>" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;" in html and "a &amp; b" in html
