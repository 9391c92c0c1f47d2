"""The code is linted and formatted as the project's ruff configuration says (pyproject.toml):
pycodestyle, pyflakes, bugbear, import order, pyupgrade and simplifications, and ``ruff format``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("ruff is not installed: CI installs the test extras (pip install '.[test]')")
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return [found]


@pytest.mark.parametrize(
    "args", [["check", "engine", "tests"], ["format", "--check", "engine", "tests"]], ids=["check", "format"]
)
def test_ruff_is_clean(args: list[str]) -> None:
    out = subprocess.run([*_ruff(), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
