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


def update(paths: list[str]) -> None:
    """Rewrite the output under every ``$ concur`` line of the given docs with what concur prints now.

    For maintainers after an intended change: ``python tests/engine/test_docs.py docs/t1-kv-cache.md``;
    review the diff before committing.
    """

    def refresh(block: re.Match[str]) -> str:
        out_lines: list[str] = []
        for line in block.group(1).splitlines():
            if line.startswith("$ "):
                if out_lines and not out_lines[-1].startswith("$ "):
                    pass
                out_lines.append(line)
                if line.startswith("$ concur "):
                    proc = subprocess.run([sys.executable, "-m", "concur.cli", *shlex.split(line[2:])[1:]],
                                          capture_output=True, text=True, timeout=300, cwd=DOCS.parent)
                    text = proc.stdout + (proc.stderr if proc.returncode else "")
                    out_lines.extend(text.rstrip("\n").splitlines())
            elif not out_lines or not any(x.startswith("$ concur ") for x in out_lines):
                out_lines.append(line)
        return "```console\n" + "\n".join(out_lines) + "\n```"

    for p in paths:
        path = Path(p)
        path.write_text(BLOCK.sub(refresh, path.read_text()))


if __name__ == "__main__":
    update(sys.argv[1:])
