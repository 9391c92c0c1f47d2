"""The engine's type hints are checked: ``mypy --strict`` over engine/concur (a type error fails the suite).

Strict mode also refuses untyped definitions, bare generics (``dict``, ``Callable``), functions that
return ``Any`` where they promise a type, and ``# type: ignore`` comments that no longer silence anything.
The pyproject's ``[tool.mypy]`` sets ``strict = true`` too, so a plain ``mypy engine/concur`` checks the same.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow_check  # a minute of mypy: left out while iterating with -m "not slow_check"


def test_mypy_strict_is_clean() -> None:
    pytest.importorskip("mypy")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(ROOT / "engine" / "concur")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
