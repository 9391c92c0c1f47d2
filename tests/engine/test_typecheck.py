"""The engine's type hints are checked: mypy over engine/concur (a type error fails the suite)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_is_clean():
    pytest.importorskip("mypy")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", str(ROOT / "engine" / "concur")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
