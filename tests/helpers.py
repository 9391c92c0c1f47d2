"""Helpers shared by the test folders: the system tools a test needs.

A missing system tool (LibreOffice, poppler, redis-server, openssl) skips the test locally and
fails it under ``CI=true`` (CI installs them all: ``.ci/run``).

Importable as ``helpers`` from every test module: ``tests/`` is on ``sys.path`` because
``tests/conftest.py`` lives there (pytest's default import mode).
"""

from __future__ import annotations

import os
import shutil

import pytest


def ci_enabled() -> bool:
    """True when running in CI, where a missing tool must fail rather than skip."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(message: str, package: str) -> None:
    """Fail (CI=true: ``install PACKAGE``) or skip the calling test because of ``message``."""
    if ci_enabled():
        pytest.fail(f"{message} and CI=true: install {package}", pytrace=False)
    pytest.skip(message)


def require_tool(name: str, package: str | None = None) -> str:
    """Path of executable ``name``; skip the test when missing, fail it when CI=true."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not on PATH", package or name)
    assert path is not None
    return path


def require_soffice() -> None:
    """Skip (locally) or fail (CI=true) when LibreOffice is not installed."""
    if not (shutil.which("soffice") or shutil.which("libreoffice")):
        missing("LibreOffice (soffice) is not on PATH", "libreoffice-calc-nogui")


def require_poppler() -> None:
    """Skip (locally) or fail (CI=true) when pdftotext/pdftoppm (poppler-utils) are missing."""
    if not (shutil.which("pdftotext") and shutil.which("pdftoppm")):
        missing("pdftotext/pdftoppm (poppler-utils) are not on PATH", "poppler-utils")
