"""A bare number means one thing on every path a value enters by (the rule of concur.lang.values).

``--set t_step=30`` once meant 30 s where ``concur show`` printed ms. Here every non-choice
variable of every shipped pack is given the same bare number ``x`` through each path -- ``--set``
(parse_sets, then resolve_givens), ``--over NAME=x..x:1`` (the sweep's display text), a scenario
file, the API's ``given`` dict, a pint Quantity of ``x`` in the display unit -- and each must give
the base value ``x * var.display.factor``; the workbook input the exporter writes for it must show
``x`` again, and ``concur show PACK --json`` must print the display unit for it.

Equality is to 1e-12 relative: the paths multiply by the same factor, but a pint unit name
("millisecond") is resolved by its own lookup, which may differ from "ms" in the last bit.
"""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import concur
from concur.cli.commands.show import pack_document
from concur.cli.givens import load_scenario, parse_sets
from concur.cli.ranges import parse_range
from concur.excel.from_solution import display_value, sheet_var, typed_input
from concur.excel.plan import Input
from concur.lang.library import get_pack, pack_paths
from concur.lang.model import build_model
from concur.lang.units import registry
from concur.solver.givens import resolve_givens
from concur.sweep.vector import _display_text, range_values

PACKS = sorted(pack_paths())
REL = 1e-12


@functools.cache
def model(pack: str):
    return build_model([pack])


def numeric(pack: str) -> list[str]:
    return [n for n, v in model(pack).variables.items() if not v.choices]


def display_bounds(var) -> tuple[float, float]:
    """The variable's admissible range in its display unit, closed to a finite window for drawing."""
    lo, hi = var.bounds
    lo_d = -1e6 if lo is None else lo / var.display.factor
    hi_d = (max(lo_d, 0.0) + 1e6) if hi is None else hi / var.display.factor
    return lo_d, hi_d


def fixed_values(var) -> list[float]:
    """A few values inside the bounds: the low end, a middling one, an awkward float, a large one."""
    lo, hi = display_bounds(var)
    if var.integer:
        lo_i, hi_i = math.ceil(lo), math.floor(hi)
        return sorted({lo_i, min(hi_i, lo_i + 3), min(hi_i, max(lo_i, 64)), min(hi_i, max(lo_i, 1000))})
    picks = [lo, lo + (hi - lo) * 0.3, lo + (hi - lo) * (0.1 + 0.2), hi]
    return [p for p in picks if lo <= p <= hi]


def values_strategy(var):
    lo, hi = display_bounds(var)
    if var.integer:
        return st.integers(math.ceil(lo), min(math.floor(hi), math.ceil(lo) + 10**6))
    # Values whose base magnitude would be subnormal lose bits in any product: not a unit question.
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False, allow_subnormal=False).filter(
        lambda v: v == 0 or abs(v) > 1e-290
    )


def text_of(x: float | int) -> str:
    return repr(x)


# ---------------------------------------------------------------- the paths


def via_set(m, name, x):
    return resolve_givens(m, parse_sets((f"{name}={text_of(x)}",))).values[name]


def via_over(m, name, x):
    swept, spec, is_range = parse_range(f"{name}={text_of(x)}..{text_of(x)}:1")
    assert swept == name and is_range
    points = range_values(spec[0], spec[1], spec[2], log=False)
    assert len(points) == 1
    return resolve_givens(m, {name: _display_text(m, name, float(points[0]))}).values[name]


def via_scenario(m, name, x, folder):
    path = folder / f"scenario-{name}.yaml"
    path.write_text(f"given:\n  {name}: {text_of(x)}\n")
    given_values, _packs, _find = load_scenario(str(path))
    return resolve_givens(m, given_values).values[name]


def via_api_dict(m, name, x):
    return resolve_givens(m, {name: x}).values[name]


def via_quantity(m, name, x):
    var = m.variables[name]
    return resolve_givens(m, {name: registry().Quantity(x, var.display.text)}).values[name]


def workbook_shows(m, name, base, typed):
    """What the exporter writes in the input cell for a given (value, unit): see plan_from_solution."""
    var = m.variables[name]
    inp = typed_input(Input(sheet_var(var), display_value(var, base), source="given"), var, base, typed)
    return inp.value, inp.var.unit


def check_one_meaning(pack, name, x, folder):
    m = model(pack)
    var = m.variables[name]
    expected = x * var.display.factor
    paths = {
        "--set": via_set(m, name, x),
        "--over": via_over(m, name, x),
        "scenario": via_scenario(m, name, x, folder),
        "api dict": via_api_dict(m, name, x),
        "pint Quantity": via_quantity(m, name, x),
    }
    for path, base in paths.items():
        assert base == pytest.approx(expected, rel=REL, abs=0.0), (
            f"{pack}.{name} = {x!r} via {path}: {base!r}, not {expected!r} ({x!r} {var.display.text})"
        )
    for typed in (None, text_of(x)):  # the exporter with and without the typed text at hand
        shown, unit = workbook_shows(m, name, paths["--set"], typed)
        assert shown == pytest.approx(x, rel=REL, abs=0.0), f"{pack}.{name}: the workbook shows {shown!r}, not {x!r}"
        assert unit == var.display.text
    assert pack_document(m)["variables"][name]["unit"] == var.display.text


@pytest.mark.parametrize("pack, name", [pytest.param(p, n, id=f"{p}.{n}") for p in PACKS for n in numeric(p)])
def test_fixed_values_mean_one_thing_on_every_path(pack, name, tmp_path):
    for x in fixed_values(model(pack).variables[name]):
        check_one_meaning(pack, name, x, tmp_path)


@pytest.mark.parametrize("pack", PACKS)
def test_drawn_values_mean_one_thing_on_every_path(pack, tmp_path_factory):
    """Hypothesis: any in-bounds value of any variable, 60 draws per pack, derandomized for CI."""
    folder = tmp_path_factory.mktemp(f"scen-{pack}")
    names = numeric(pack)

    @settings(max_examples=60, deadline=None, derandomize=True, database=None)
    @given(data=st.data())
    def run(data):
        name = data.draw(st.sampled_from(names), label="variable")
        x = data.draw(values_strategy(model(pack).variables[name]), label="x")
        check_one_meaning(pack, name, x, folder)

    run()


@pytest.mark.parametrize("pack", PACKS)
def test_show_json_prints_the_display_unit(pack):
    """The unit ``concur show PACK --json`` prints (the command itself) is the unit a bare number means."""
    out = subprocess.run(
        [sys.executable, "-m", "concur.cli", "show", pack, "--json"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)["variables"]
    m = model(pack)
    assert set(shown) == set(m.variables)
    for name, var in m.variables.items():
        assert shown[name]["unit"] == (None if var.choices else var.display.text), name
        lo, hi = var.bounds
        if shown[name]["bounds"] is not None:  # bounds are shown in the display unit too
            assert shown[name]["bounds"][0] == (None if lo is None else pytest.approx(lo / var.display.factor))
            assert shown[name]["bounds"][1] == (None if hi is None else pytest.approx(hi / var.display.factor))


# ---------------------------------------------------------------- the --json "given" echo


def _example_cases():
    for pack in PACKS:
        for ex in get_pack(pack).examples:
            if ex.error is None:
                yield pytest.param(pack, ex, id=f"{pack}: {ex.name}")


@pytest.mark.parametrize("pack, example", list(_example_cases()))
def test_json_given_echoes_value_unit_source_and_typed_text(pack, example):
    """Every pack example's givens come back in ``to_json()["given"]`` (what ``--json`` prints): the
    display-unit value, the display unit, where it came from, and the text typed for typed values."""
    m = model(pack)
    sol = concur.solve(find=list(example.find), given=dict(example.given), packs=[pack])
    echo = sol.to_json()["given"]
    for key, raw in example.given.items():
        assert key in echo, f"{key} is not echoed"
        if key in m.presets:
            assert echo[key] == {"value": str(raw), "unit": "", "source": "preset"}
            continue
        var = m.variables[key]
        entry = echo[key]
        assert entry["source"] == "given"
        assert entry["unit"] == var.display.text
        assert entry["typed"] == str(raw)
        base = sol.givens.values[key]
        assert entry["value"] == (var.choices[int(base)] if var.choices else pytest.approx(base / var.display.factor))
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):  # a bare number comes back as typed
            assert entry["value"] == pytest.approx(raw)
    for key, entry in echo.items():  # what the presets filled in says which preset
        if key in m.variables and key not in example.given:
            assert entry["source"].startswith(("preset ", "default", "given")), entry
            assert "typed" not in entry or entry["source"] == "given"


def test_cli_json_given_for_the_issue_question():
    """``--json`` echo of the littles_law question: bare numbers in the display unit, a typed rate
    kept as typed and converted to the display unit."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "concur.cli",
            "solve",
            "littles_law",
            "--find",
            "replicas",
            "--set",
            "arrival_rate=300/hour",
            "--set",
            "ttft=500",
            "--set",
            "output_tokens=400",
            "--set",
            "t_step=30",
            "--set",
            "per_replica_concurrency=64",
            "--set",
            "utilization=0.8",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    echo = json.loads(out.stdout)["given"]
    assert echo["t_step"] == {"value": 30.0, "unit": "ms", "source": "given", "typed": "30"}
    assert echo["ttft"] == {"value": 500.0, "unit": "ms", "source": "given", "typed": "500"}
    assert echo["arrival_rate"]["value"] == pytest.approx(300 / 3600)
    assert (echo["arrival_rate"]["unit"], echo["arrival_rate"]["source"], echo["arrival_rate"]["typed"]) == (
        "request/s",
        "given",
        "300/hour",
    )


def test_cli_json_given_names_the_preset():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "concur.cli",
            "solve",
            "llm_memory",
            "--find",
            "users",
            "--set",
            "model=gpt-oss-120b",
            "--set",
            "gpu=h100-sxm-80gb",
            "--set",
            "tp=4",
            "--set",
            "context=16384 token",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    echo = json.loads(out.stdout)["given"]
    assert echo["model"] == {"value": "gpt-oss-120b", "unit": "", "source": "preset"}
    assert echo["gpu_memory"]["source"] == "preset gpu=h100-sxm-80gb" and echo["gpu_memory"]["unit"] == "GiB"
    assert "typed" not in echo["gpu_memory"]
    assert echo["context"] == {"value": 16384.0, "unit": "token/user", "source": "given", "typed": "16384 token"}


def test_workbook_input_of_a_real_export_shows_the_bare_number():
    """End to end through plan_from_solution: ``t_step=30`` (ms) is an input cell showing 30 ms."""
    from concur.excel.from_solution import plan_from_solution

    sol = concur.solve(
        find="replicas",
        given={
            "arrival_rate": 50,
            "ttft": 500,
            "output_tokens": 400,
            "t_step": 30,
            "per_replica_concurrency": 64,
            "utilization": 0.8,
        },
        packs="littles_law",
    )
    inputs = {i.var.name: i for i in plan_from_solution(sol, "fleet").inputs}
    assert (inputs["t_step"].value, inputs["t_step"].var.unit) == (30, "ms")
    assert (inputs["ttft"].value, inputs["ttft"].var.unit) == (500, "ms")
    assert (inputs["arrival_rate"].value, inputs["arrival_rate"].var.unit) == (50, "request/s")
