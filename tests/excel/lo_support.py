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


def require_soffice() -> None:
    """Skip (locally) or fail (CI=true) when LibreOffice is not installed."""
    if shutil.which("soffice") or shutil.which("libreoffice"):
        return
    message = "LibreOffice (soffice) is not on PATH"
    if ci_enabled():
        pytest.fail(message + " and CI=true: install libreoffice-calc-nogui")
    pytest.skip(message)


def require_poppler() -> None:
    """Skip (locally) or fail (CI=true) when pdftotext/pdftoppm (poppler-utils) are missing."""
    if shutil.which("pdftotext") and shutil.which("pdftoppm"):
        return
    message = "pdftotext/pdftoppm (poppler-utils) are not on PATH"
    if ci_enabled():
        pytest.fail(message + " and CI=true: install poppler-utils")
    pytest.skip(message)
