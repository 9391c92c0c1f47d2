"""The ``>>>`` examples in the engine's docstrings run, so a broken example fails the suite.

Every module of ``concur`` whose source holds a ``>>>`` line is imported and its docstrings run
with ``doctest`` (ELLIPSIS and NORMALIZE_WHITESPACE). An example that cannot run here (it needs a
Redis server, a GPU or a file) is marked ``# doctest: +SKIP`` next to a comment saying why; it
still has to be an example doctest finds, so each module's ``>>>`` lines are counted against the
examples doctest collects. pytest's ``--doctest-modules`` is not used: this test is the gate.
"""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

import concur

PACKAGE = Path(concur.__file__).resolve().parent
PROMPT = re.compile(r"^\s*>>>", re.MULTILINE)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules_with_examples() -> list[str]:
    return sorted(
        _module_name(path) for path in PACKAGE.rglob("*.py") if PROMPT.search(path.read_text(encoding="utf-8"))
    )


MODULES = _modules_with_examples()


def test_the_engine_has_docstring_examples() -> None:
    # the discovery itself can fail (a moved package): then no example would run and every case pass
    assert len(MODULES) >= 20, MODULES
    assert "concur.maths.erlang" in MODULES and "concur.primitives.ws_deque" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder().find(module, name)
    found = sum(len(t.examples) for t in tests)
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    written = len(PROMPT.findall(source))
    assert found == written, (
        f"{name} has {written} '>>>' lines but doctest finds {found} examples: an example outside a "
        "docstring doctest reads (a nested function's, a plain string) or a comment-only example is never run"
    )
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, "".join(report)
