"""A unit string is bounded before pint reads it, at every place one enters.

pint evaluates ``**`` on integers exactly: ``m**(9**9**9)`` never ended (``concur check`` still
running at 60 s) and a 4,000-digit exponent gave a traceback. Each entry point -- a pack's
``unit:``, a ``[unit]`` literal in a formula, ``--set``, a scenario's ``given:``, a workbook
definition's ``given:`` and its scenarios' ``set:`` -- now ends in one line naming where, exit 1
(check) or 2 (usage). Commands run under a subprocess timeout; nothing here times itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from concur.errors import UnitError
from concur.lang.units import MAX_UNIT_CHARS, MAX_UNIT_EXPONENT, unit_info, unit_problem

HANG = "m**(9**9**9)"
LONG = "m**" + "9" * 4000
BASE = "pack: base\nvariables:\n  a: {unit: s}\n  b: {unit: s}\nequations:\n  - b = 2 * a\n"


def concur(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "concur.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def one_line(out: subprocess.CompletedProcess) -> str:
    text = out.stdout + out.stderr
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.startswith("error") or ": error:" in line]
    assert len(lines) == 1, text
    assert len(lines[0]) < 400, lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "text",
    [
        "m**2",
        "s**-1",
        "m**(1/2)",
        "m ** 2",
        "(m/s)**2",
        "m^2",
        "B/token",
        "usd/gpu/hour",
        "s*replica/request",
        "1/hour",
    ],
)
def test_ordinary_units_pass(text):
    assert unit_problem(text) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (HANG, "not a plain number"),
        ("m**9**9", "not a plain number"),
        ("m**x", "not a plain number"),
        ("m**(2)**3", "not a plain number"),
        (f"m**{MAX_UNIT_EXPONENT + 1}", f"at most {MAX_UNIT_EXPONENT}"),
        ("m**(999/2)", "at most"),
        ("token**1000000", f"exponent of magnitude 1e+06 (at most {MAX_UNIT_EXPONENT})"),  # said 100: 3 digits read
        ("m**-12345.5", "exponent of magnitude 12345.5"),
        (LONG, f"at most {MAX_UNIT_CHARS}"),
        ("m" + "*m" * 50, "parts"),
        ("(" * 6 + "m" + ")" * 6, "brackets"),
        ("1" + "0" * 30 + " * m", "number of 31 characters"),
        ("m;rm", "';'"),
    ],
)
def test_bounds_refuse_before_pint(text, says):
    assert says in (unit_problem(text) or "")
    with pytest.raises(UnitError, match="unit '"):
        unit_info(text, variable="a")


def _files(tmp: Path, unit: str) -> None:
    (tmp / "base.yaml").write_text(BASE)
    (tmp / "u.yaml").write_text(
        BASE.replace("pack: base", "pack: u").replace("{unit: s}\n  b", f'{{unit: "{unit}"}}\n  b')
    )
    (tmp / "lit.yaml").write_text(
        BASE.replace("pack: base", "pack: lit").replace("2 * a", f"a * [1 {unit}] / [1 {unit}]")
    )
    (tmp / "scen.yaml").write_text(f'packs: [base.yaml]\ngiven: {{a: "1 {unit}"}}\n')
    (tmp / "def.yaml").write_text(f'title: t\npacks: [base.yaml]\ngiven: {{a: "1 {unit}"}}\nfind: [b]\n')
    (tmp / "def2.yaml").write_text(
        f'title: t\npacks: [base.yaml]\ngiven: {{a: 1}}\nfind: [b]\nscenarios:\n  - {{name: x, set: {{a: "2 {unit}"}}}}\n'
    )


@pytest.mark.parametrize("unit", [HANG, LONG], ids=["tower", "4000-digit"])
def test_every_entry_point_ends_in_one_line(tmp_path, unit):
    _files(tmp_path, unit)
    cases = [
        (("check", "u.yaml"), 1, "u.yaml:3:"),
        (("check", "lit.yaml"), 1, "lit.yaml:6:"),
        (("solve", "base.yaml", "--find", "b", "--set", f"a=1 {unit}"), 2, "variable 'a'"),
        (("solve", "--scenario", "scen.yaml", "--find", "b"), 2, "scen.yaml:2:"),
        (("export", "def.yaml", "-o", str(tmp_path / "o.xlsx")), 2, "def.yaml:3:"),
        (("export", "def2.yaml", "-o", str(tmp_path / "o.xlsx")), 2, "def2.yaml:6:"),
    ]
    for args, code, where in cases:
        out = concur(*args, cwd=tmp_path)
        line = one_line(out)
        assert out.returncode == code, (args, out.stderr)
        assert where in line and ("unit '" in line or "the limit is 2000" in line), (args, line)
    assert not (tmp_path / "o.xlsx").exists()
