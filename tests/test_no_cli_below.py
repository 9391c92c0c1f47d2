"""No layer below the command line speaks in its options.

A solver, sweep, analysis, workbook or language error (or note) is read by Python callers of
``concur.solve`` and by the web page as well as by the ``concur`` command, so its text names
variables and values, never ``--set``, ``--find`` or ``--over``: the error carries the data
(``variable``, ``missing``, ``kind``) and the command line's hint table (``concur.cli.hints``)
words the flag. Every string literal of those packages is read with ``ast`` (docstrings, which
may show a command line as a worked example, and comments are not messages).
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest

from concur.cli.hints import HINTS, for_cli
from concur.errors import ConcurError, UnderdeterminedError, UsageError

ROOT = Path(__file__).resolve().parents[1] / "engine" / "concur"
BELOW = ("solver", "sweep", "analysis", "excel", "lang")
FLAG = re.compile(r"--(set|find|over)\b")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    # an attribute docstring: a bare string right after an assignment
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for prev, stmt in itertools.pairwise(body):
                if (
                    isinstance(prev, (ast.Assign, ast.AnnAssign))
                    and isinstance(stmt, ast.Expr)
                    and isinstance(stmt.value, ast.Constant)
                ):
                    out.add(id(stmt.value))
    return out


def flag_literals(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, text) of each string literal of ``source`` that names --set, --find or --over."""
    tree = ast.parse(source, filename=filename)
    skip = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and FLAG.search(node.value)
    ]


def test_no_message_below_the_cli_names_a_cli_flag() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}"
        for package in BELOW
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, text in flag_literals(path.read_text(), str(path))
    ]
    assert found == [], "CLI flags in messages below the CLI (raise with kind=..., word it in cli/hints.py):\n" + (
        "\n".join(found)
    )


def test_the_grep_sees_f_strings_and_plain_strings_but_not_docstrings() -> None:
    source = '''
"""Worked example: concur solve --find users."""
X = 1
"""An attribute docstring naming --set x=1."""
def f(name):
    """Docs may show --over a=1..2."""
    raise ValueError(f"drop --set {name}=...")
HINT = "or --find it"
'''
    assert sorted(line for line, _ in flag_literals(source)) == [7, 8]


def test_every_kind_the_engine_raises_has_its_cli_words() -> None:
    kinds = set()
    for package in BELOW:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call) or not ast.unparse(node.func).endswith("Error"):
                    continue  # an error's kind, not another call's keyword of that name
                kinds |= {k.value.value for k in node.keywords if k.arg == "kind" and isinstance(k.value, ast.Constant)}
    assert kinds, "the engine raises no kinds: the grep above found nothing to check"
    assert sorted(kinds - HINTS.keys()) == []


@pytest.mark.parametrize(
    ("exc", "hint"),
    [
        (
            UsageError("'users' is both given and asked for", variable="users", kind="given_and_asked"),
            "drop --set users=... or --find users",
        ),
        (
            UsageError(
                "too few", variable="replicas", hint="give replicas of at least 3, or ask for it", kind="ask_for"
            ),
            "give replicas of at least 3, or ask for it (--find replicas)",
        ),
        (
            UnderdeterminedError("missing", missing=("model", "arrival_rate"), hint="give model", kind="missing"),
            "give --set model=... --set arrival_rate=...",
        ),
        (UsageError("plain", hint="as it was"), "as it was"),
    ],
)
def test_the_cli_words_each_kind_once(exc: ConcurError, hint: str) -> None:
    message, code = exc.message, exc.exit_code
    assert for_cli(exc).hint == hint
    assert for_cli(exc).hint == hint  # a second pass changes nothing
    assert exc.message == message and exc.exit_code == code
    assert str(exc).endswith(hint)


def test_an_underdetermined_question_may_point_at_the_embedded_scenario() -> None:
    exc = UnderdeterminedError("not enough givens", missing=("x",), hint="give x")
    assert for_cli(exc, scenario_hint=True).hint == (
        "give x; or start from the embedded scenario: --scenario default --set NAME=VALUE"
    )
