"""``concur check``: unit mismatches exit 1 with file:line; hostile packs are refused fast."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

GOOD_HEAD = "pack: {name}\nvariables:\n  a: {{unit: GiB}}\n  b: {{unit: s}}\n  x: {{unit: GiB}}\nequations:\n"


def check(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "concur.cli", "check", *paths], capture_output=True, text=True, timeout=60
    )


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def test_shipped_packs_are_clean():
    out = check()
    assert out.returncode == 0, out.stdout + out.stderr


def test_unit_mismatch_exits_1_with_location(tmp_path):
    path = write(tmp_path, "bad", GOOD_HEAD.format(name="bad") + "  - x = a + b\n")
    out = check(path)
    assert out.returncode == 1
    assert f"{path}:7:" in out.stdout
    assert "cannot add 'a'" in out.stdout and "'b'" in out.stdout


@pytest.mark.parametrize(
    "formula, needle",
    [
        ("__import__('os').system('touch pwned')", "only the listed functions"),
        ("9**9**9**9", "exponent"),
        ("(lambda: 1)()", "only the listed functions"),
        ("a.__class__", "not allowed"),
        ("a[0]", "subscripts are not allowed"),
        ("open('x')", "unknown function"),
    ],
)
def test_hostile_formulas_are_refused(tmp_path, formula, needle):
    path = write(tmp_path, "evil", GOOD_HEAD.format(name="evil") + f'  - "x = {formula}"\n')
    out = check(path)  # under the subprocess timeout: 9**9**9**9 is refused, never computed
    assert out.returncode in (1, 2)
    assert needle in out.stdout + out.stderr
    assert not (Path.cwd() / "pwned").exists()


def test_python_tag_is_refused(tmp_path):
    path = write(tmp_path, "tag", "pack: tag\nvariables: !!python/object/apply:os.system ['touch pwned']\n")
    out = check(path)
    assert out.returncode == 1
    assert "tag" in out.stdout and "not allowed" in out.stdout


def test_huge_file_is_refused(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("pack: huge\ndoc: '" + "x" * 10_000_000 + "'\n")
    out = check(str(path))
    assert out.returncode == 1 and "limited to" in out.stdout


def test_duplicate_keys_and_reserved_names(tmp_path):
    dup = write(tmp_path, "dup", "pack: dup\nvariables:\n  a: {unit: s}\n  a: {unit: s}\n")
    assert "duplicate key 'a'" in check(dup).stdout
    res = write(tmp_path, "res", "pack: res\nvariables:\n  E: {unit: s}\n")
    assert "reserved" in check(res).stdout


def test_an_equation_with_the_same_side_twice_is_a_problem(tmp_path):
    """``a = a`` passed the check ("ok: unit-consistent"); every solve using it then said a was
    undetermined, far from the line that made it so."""
    path = write(tmp_path, "same", GOOD_HEAD.format(name="same") + "  - x = a\n  - b = b\n")
    out = check(path)
    assert out.returncode == 1 and out.stdout.count("error:") == 1, out.stdout
    assert f"{path}:8:5: error: equation 'b = b' has the same expression on both sides" in out.stdout


def test_a_rename_that_merges_two_variables_of_a_used_pack_is_a_problem(tmp_path):
    """``rename: {a: x}`` on a pack with ``x = a`` made ``x = x``: check said ok and solve answered
    x = 0 with exit 0. Renaming onto a name the pack does not declare, or swapping two, stays fine."""
    write(tmp_path, "base", GOOD_HEAD.format(name="base") + "  - x = a\n")
    merged = write(tmp_path, "merged", "pack: merged\nuses: [{pack: base, rename: {a: x}}]\nequations: []\n")
    out = check(merged)
    assert out.returncode == 1, out.stdout
    assert f"{merged}:2:8: error: the rename makes base's variables 'a' and 'x' one variable 'x'" in out.stdout
    swapped = write(tmp_path, "swapped", "pack: swapped\nuses: [{pack: base, rename: {a: x, x: a}}]\nequations: []\n")
    shared = write(tmp_path, "shared", "pack: shared\nuses: [{pack: base, rename: {a: c}}]\nequations: []\n")
    assert check(swapped, shared).returncode == 0


def test_floor_of_bytes_is_refused(tmp_path):
    path = write(
        tmp_path, "rnd", "pack: rnd\nvariables:\n  a: {unit: GiB}\n  n: {unit: GiB}\nequations:\n  - n = floor(a)\n"
    )
    out = check(path)
    assert out.returncode == 1 and "rounds a count" in out.stdout


def test_pre_commit_hook_declared():
    hooks = (Path(__file__).parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "concur check" in hooks


# ---------------------------------------------------------------- a CI gate: every problem, machine formats

TWO_BAD = (
    "pack: two\nvariables:\n  a: {unit: GiB}\n  b: {unit: s}\n  x: {unit: GiB}\n  y: {unit: furlongz}\n"
    "  z: {unit: s, colour: red}\nequations:\n  - x = a + b\n  - x = a * (b\n  - x = a + q\n  - b = z\n"
    "  - y = a\n  - x = a - b * 2\n"
)


def test_every_problem_of_a_pack_that_does_not_load(tmp_path):
    path = write(tmp_path, "two", TWO_BAD)
    out = check(path)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    # each bad variable, each bad equation, and the unit mismatches of the sound rest, in file order
    assert [line.split(": error: ")[0] for line in lines] == [
        f"{path}:6:7",
        f"{path}:7:3",
        f"{path}:9:5",
        f"{path}:10:13",
        f"{path}:11:5",
        f"{path}:14:5",
    ]
    assert "furlongz" in lines[0] and "colour" in lines[1] and "cannot add" in lines[2]
    assert "never closed" in lines[3] and "'q'" in lines[4] and "cannot subtract" in lines[5]
    # equations naming a variable whose declaration failed (y, z) are not blamed a second time
    assert "b = z" not in out.stdout and "y = a" not in out.stdout
    assert "6 problem(s) in 1 pack(s)" in out.stderr


def test_two_mismatches_give_two_diagnostics_in_json(tmp_path):
    import json

    path = write(tmp_path, "pair", GOOD_HEAD.format(name="pair") + "  - x = a + b\n  - x = a - b\n")
    out = check("--format", "json", path)
    assert out.returncode == 1
    diags = json.loads(out.stdout)
    assert [(d["file"], d["line"], d["col"], d["severity"]) for d in diags] == [
        (path, 7, 5, "error"),
        (path, 8, 5, "error"),
    ]
    assert "cannot add" in diags[0]["message"] and "cannot subtract" in diags[1]["message"]
    clean = check("--format", "json")
    assert clean.returncode == 0 and json.loads(clean.stdout) == []


def test_github_annotations(tmp_path):
    path = write(tmp_path, "gh", GOOD_HEAD.format(name="gh") + "  - x = a + b\n")
    out = check("--format", "github", path)
    assert out.returncode == 1
    (line,) = out.stdout.splitlines()
    assert line.startswith(f"::error file={path},line=7,col=5::unit mismatch in 'x = a + b'")


def test_github_annotation_escapes_newlines_and_properties():
    from concur.cli.commands.check import github_annotation
    from concur.errors import Location
    from concur.lang.check import Diagnostic

    text = github_annotation(Diagnostic(Location("a,b:c.yaml", 1, 2), "50% of\nit"))
    assert text == "::error file=a%2Cb%3Ac.yaml,line=1,col=2::50%25 of%0Ait"


def test_missing_file_is_a_usage_error(tmp_path):
    import json

    out = check(str(tmp_path / "absent.yaml"))
    assert out.returncode == 2 and "does not exist" in out.stderr and "Traceback" not in out.stderr
    out = check("--format", "json", str(tmp_path / "absent.yaml"))
    assert out.returncode == 2 and json.loads(out.stdout)["error"]["code"] == 2


def test_folder_reports_every_file_and_a_broken_used_pack_once(tmp_path):
    write(tmp_path, "base", "pack: base\nvariables:\n  a: {unit: GiB, doc: [1}\n")
    write(tmp_path, "user1", "pack: user1\nuses: [base]\nvariables:\n  b: {unit: s}\n")
    write(tmp_path, "user2", "pack: user2\nuses: [base]\nvariables:\n  c: {unit: s}\nequations:\n  - c = c + c\n")
    out = check(str(tmp_path))
    assert out.returncode == 1
    assert out.stdout.count("base.yaml:3") == 1, out.stdout
