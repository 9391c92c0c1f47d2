"""Docs cannot drift: every ``$ concur ...`` line in a ```console block of docs/*.md and README.md is run
and its output compared (whitespace-normalised) with the lines that follow it in the doc; every
```pycon block (``>>>`` lines and their output, doctest-style) is run too, the blocks of one page
as one session in page order, from the repository root."""

from __future__ import annotations

import doctest
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"```console\n(.*?)```", re.S)
PYCON = re.compile(r"```pycon\n(.*?)```", re.S)
WRITES = ("-o", "--plot", "--csv")  # commands that write files run in a temporary folder


def _examples():
    for doc in [*sorted(DOCS.glob("*.md")), DOCS.parent / "README.md"]:
        for block in BLOCK.findall(doc.read_text()):
            lines = block.splitlines()
            i = 0
            while i < len(lines):
                if lines[i].startswith("$ concur "):
                    cmd = lines[i][2:]
                    j = i + 1
                    while j < len(lines) and not lines[j].startswith("$ "):
                        j += 1
                    yield pytest.param(cmd, "\n".join(lines[i + 1 : j]), id=f"{doc.name}: {cmd[:70]}")
                    i = j
                else:
                    i += 1


def _norm(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.strip().splitlines() if line.strip()]


def _run(command: str, tmp: Path) -> str:
    """What ``$ command`` prints: stdout, and stderr too when it fails."""
    args = shlex.split(command)[1:]
    out = subprocess.run(
        [sys.executable, "-m", "concur.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp if any(a in WRITES for a in args) else DOCS.parent,
    )
    return out.stdout + (out.stderr if out.returncode else "")


def test_readme_starts_with_the_two_setup_commands_and_the_first_answers_the_fleet_question():
    """README.md opens with exactly two commands (install and run the main job; install and test);
    the main job's concur command answers the embedded fleet scenario as the text beside it says."""
    text = (DOCS.parent / "README.md").read_text()
    first = re.match(r"# concur\n\n```bash\n(.*?)```", text, re.S)
    assert first is not None, "README.md must open with its set-up commands"
    commands = first.group(1).strip().splitlines()
    assert len(commands) == 2
    assert commands[0].startswith("python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/concur ")
    assert (
        commands[1]
        == "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/python -m pytest -q -n auto"
    )
    job = shlex.split(commands[0].split("&& .venv/bin/concur ", 1)[1])
    out = subprocess.run(
        [sys.executable, "-m", "concur.cli", *job, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=DOCS.parent,
    )
    assert out.returncode == 0, out.stderr
    import json

    results = json.loads(out.stdout)["results"]
    assert results["replicas"]["value"] == 7 and results["fleet_gpus"]["value"] == 28
    assert f"${results['cost_per_month']['value']:,.0f} a month" in text.replace("\n", " ")


def test_ci_runs_the_readme_test_command():
    """.ci/run runs README's test command (pip quieter, nothing else changed), so CI measures and
    passes what a reader runs; nothing in it deselects tests."""
    readme = re.match(r"# concur\n\n```bash\n(.*?)```", (DOCS.parent / "README.md").read_text(), re.S)
    assert readme is not None
    command = readme.group(1).strip().splitlines()[1]
    ci = (DOCS.parent / ".ci" / "run").read_text().splitlines()
    assert command.replace("pip install ", "pip install -q ", 1) in ci
    pytest_args = [line.split(" pytest", 1)[1] for line in ci if " pytest" in line]
    assert pytest_args and not [a for a in pytest_args if " -m " in a or " -k " in a or "--deselect" in a]


@pytest.mark.parametrize("command, expected", list(_examples()))
def test_doc_example(command, expected, tmp_path):
    got = _run(command, tmp_path)
    assert _norm(got) == _norm(expected), f"$ {command}\n--- doc says ---\n{expected}\n--- concur says ---\n{got}"


def _sessions():
    for doc in sorted(DOCS.glob("*.md")):
        if PYCON.search(doc.read_text()):
            yield pytest.param(doc, id=doc.name)


def _examples_of(doc: Path) -> list[doctest.Example]:
    """Every ``>>>`` example of the page's pycon blocks, with its line number in the page."""
    text = doc.read_text()
    examples = []
    for block in PYCON.finditer(text):
        offset = text.count("\n", 0, block.start(1))
        found = doctest.DocTestParser().get_examples(block.group(1), name=doc.name)
        assert found, f"{doc.name}:{offset + 1}: a pycon block with no >>> lines"
        for example in found:
            example.lineno += offset
            examples.append(example)
    return examples


@pytest.mark.parametrize("doc", list(_sessions()))
def test_pycon_session(doc, monkeypatch):
    """The page's ```pycon blocks, run like one doctest file (whitespace-normalised, ``...`` allowed)."""
    monkeypatch.chdir(DOCS.parent)
    test = doctest.DocTest(_examples_of(doc), {"__name__": "__main__"}, doc.name, str(doc), 0, None)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    report: list[str] = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


def update(paths: list[str]) -> None:
    """Rewrite the output under every ``$ concur`` line of the given docs with what concur prints now.

    For maintainers after an intended change: ``python tests/test_docs.py docs/t1-kv-cache.md``;
    review the diff before committing. ```pycon blocks are not rewritten: the test prints what differs.
    """

    def refresh(block: re.Match[str]) -> str:
        out_lines: list[str] = []
        for line in block.group(1).splitlines():
            if line.startswith("$ "):
                if out_lines and not out_lines[-1].startswith("$ "):
                    pass
                out_lines.append(line)
                if line.startswith("$ concur "):
                    with tempfile.TemporaryDirectory() as tmp:  # as the test runs it: files land in a temp folder
                        text = _run(line[2:], Path(tmp))
                    out_lines.extend(text.rstrip("\n").splitlines())
            elif not out_lines or not any(x.startswith("$ concur ") for x in out_lines):
                out_lines.append(line)
        return "```console\n" + "\n".join(out_lines) + "\n```"

    for p in paths:
        path = Path(p)
        path.write_text(BLOCK.sub(refresh, path.read_text()))


if __name__ == "__main__":
    update(sys.argv[1:])


def test_cli_reference_covers_every_command_and_option():
    """docs/cli.md has a section per command and names every option (and every benchmark)."""
    import click

    from concur.cli import cli

    text = (DOCS / "cli.md").read_text()
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        assert f"## concur {name}\n" in text, f"docs/cli.md has no section for concur {name}"
        for param in command.params:
            for opt in getattr(param, "opts", []) + getattr(param, "secondary_opts", []):
                if opt.startswith("-") and opt not in ("-h", "--help"):
                    assert f"`{opt}" in text or f"{opt} " in text or f"{opt}=" in text, (
                        f"docs/cli.md does not mention {opt} of concur {name}"
                    )
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                assert f"`{sub}`" in text, f"docs/cli.md does not list concur {name} {sub}"
