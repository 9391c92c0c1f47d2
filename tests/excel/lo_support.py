"""LibreOffice and poppler availability for the Excel tests: skip locally, fail under CI=true.

A plain module (not conftest.py) so that its name cannot clash with tests/conftest.py.
"""

from __future__ import annotations

import os
import shutil

import pytest


def ci_enabled() -> bool:
    """True when running in CI, where a missing tool must fail rather than skip."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _missing(message: str, package: str) -> None:
    if ci_enabled():
        pytest.fail(f"{message} and CI=true: install {package}")
    pytest.skip(message)


def require_soffice() -> None:
    """Skip (locally) or fail (CI=true) when LibreOffice is not installed."""
    if not (shutil.which("soffice") or shutil.which("libreoffice")):
        _missing("LibreOffice (soffice) is not on PATH", "libreoffice-calc-nogui")


def require_poppler() -> None:
    """Skip (locally) or fail (CI=true) when pdftotext/pdftoppm (poppler-utils) are missing."""
    if not (shutil.which("pdftotext") and shutil.which("pdftoppm")):
        _missing("pdftotext/pdftoppm (poppler-utils) are not on PATH", "poppler-utils")
