"""``concur check``: unit mismatches exit 1 with file:line; hostile packs are refused fast."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

GOOD_HEAD = "pack: {name}\nvariables:\n  a: {{unit: GiB}}\n  b: {{unit: s}}\n  x: {{unit: GiB}}\nequations:\n"


def check(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concur.cli", "check", *paths], capture_output=True, text=True,
                          timeout=60)


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


@pytest.mark.parametrize("formula, needle", [
    ("__import__('os').system('touch pwned')", "only the listed functions"),
    ("9**9**9**9", "exponent"),
    ("(lambda: 1)()", "only the listed functions"),
    ("a.__class__", "not allowed"),
    ("a[0]", "subscripts are not allowed"),
    ("open('x')", "unknown function"),
])
def test_hostile_formulas_are_refused_fast(tmp_path, formula, needle):
    path = write(tmp_path, "evil", GOOD_HEAD.format(name="evil") + f"  - \"x = {formula}\"\n")
    start = time.monotonic()
    out = check(path)
    assert time.monotonic() - start < 20
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


def test_floor_of_bytes_is_refused(tmp_path):
    path = write(tmp_path, "rnd", "pack: rnd\nvariables:\n  a: {unit: GiB}\n  n: {unit: GiB}\n"
                                  "equations:\n  - n = floor(a)\n")
    out = check(path)
    assert out.returncode == 1 and "rounds a count" in out.stdout


def test_pre_commit_hook_declared():
    hooks = (Path(__file__).parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "concur check" in hooks
