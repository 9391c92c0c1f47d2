"""Docs cannot drift: every ``$ concur ...`` line in a ```console block of docs/*.md is run
and its output compared (whitespace-normalised) with the lines that follow it in the doc."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"```console\n(.*?)```", re.S)


def _examples():
    for doc in sorted(DOCS.glob("*.md")):
        for block in BLOCK.findall(doc.read_text()):
            lines = block.splitlines()
            i = 0
            while i < len(lines):
                if lines[i].startswith("$ concur "):
                    cmd = lines[i][2:]
                    j = i + 1
                    while j < len(lines) and not lines[j].startswith("$ "):
                        j += 1
                    yield pytest.param(cmd, "\n".join(lines[i + 1:j]), id=f"{doc.name}: {cmd[:70]}")
                    i = j
                else:
                    i += 1


def _norm(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.strip().splitlines() if line.strip()]


@pytest.mark.parametrize("command, expected", list(_examples()))
def test_doc_example(command, expected, tmp_path):
    args = shlex.split(command)[1:]
    out = subprocess.run([sys.executable, "-m", "concur.cli", *args], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path if "-o" in args or "--plot" in args or "--csv" in args else DOCS.parent)
    got = out.stdout + (out.stderr if out.returncode else "")
    assert _norm(got) == _norm(expected), f"$ {command}\n--- doc says ---\n{expected}\n--- concur says ---\n{got}"
