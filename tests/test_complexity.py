"""No function in ``engine/concur`` is over 80 lines or above cyclomatic complexity 25 (radon),
unless ``docs/architecture.md`` names it, with a reason, under "Functions above the limits".

Every function is measured: module functions, methods and closures (a closure is its own block,
as radon counts it; its lines count in its parent's too). Lines run from the ``def`` to the
function's last line. The list must stay true both ways: an unlisted function over a limit fails,
and so does a listed one that no longer exceeds any limit (or no longer exists), so the list only
shrinks. To fix a failure, split the function into named helpers; list it only when splitting
would hide what it does, and say why in one line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Function

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "engine" / "concur"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_LINES = 80
MAX_COMPLEXITY = 25
SECTION = "## Functions above the limits"
# One entry: - `solver/goal_seek.py:search` (complexity 59, 145 lines): why it stays whole.
ENTRY = re.compile(r"^- `(?P<path>[\w/]+\.py):(?P<name>[\w.]+)`[^:]*:\s*(?P<reason>\S.*)$")


def _functions(blocks: list[Function], prefix: str = "") -> Iterator[tuple[str, Function]]:
    """Every function in ``blocks`` with its qualified name (``Class.method``, ``outer.inner``)."""
    for block in blocks:
        if not isinstance(block, Function):
            continue  # a class: radon lists its methods beside it
        name = prefix + (f"{block.classname}." if block.classname and not prefix else "") + block.name
        yield name, block
        yield from _functions(block.closures, name + ".")


def offenders(source: str) -> dict[str, str]:
    """Each function of ``source`` over a limit, qualified name -> what it measures."""
    out = {}
    for name, fn in _functions(cc_visit(source)):
        lines = fn.endline - fn.lineno + 1
        if fn.complexity > MAX_COMPLEXITY or lines > MAX_LINES:
            out[name] = f"complexity {fn.complexity}, {lines} lines"
    return out


def measured() -> dict[str, str]:
    """Every offender in the engine, ``path/in/concur.py:qualified.name`` -> its measures."""
    out = {}
    for path in sorted(ENGINE.rglob("*.py")):
        rel = path.relative_to(ENGINE).as_posix()
        for name, what in offenders(path.read_text(encoding="utf-8")).items():
            out[f"{rel}:{name}"] = what
    return out


def listed() -> dict[str, str]:
    """The exceptions named in docs/architecture.md, ``path:name`` -> reason."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert SECTION in text, f"docs/architecture.md has no section {SECTION!r}"
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in body.splitlines():
        if line.startswith("- "):
            m = ENTRY.match(line)
            assert m, f"docs/architecture.md: malformed entry {line!r}: write - `path.py:name` (measures): reason"
            out[f"{m['path']}:{m['name']}"] = m["reason"]
    return out


def test_the_measure_catches_a_long_and_a_branchy_function() -> None:
    branchy = "def f(x):\n" + "".join(f"    if x == {i}:\n        return {i}\n" for i in range(25)) + "    return -1\n"
    long = "def g():\n" + "    y = 1\n" * 80
    nested = "class C:\n    def m(self):\n        def inner(x):\n" + "".join(
        f"            if x == {i}:\n                return {i}\n" for i in range(26)
    )
    assert offenders(branchy) == {"f": "complexity 26, 52 lines"}
    assert offenders(long) == {"g": "complexity 1, 81 lines"}
    assert set(offenders(nested)) == {"C.m.inner"}
    assert offenders("def h(x):\n    return x\n") == {}


def test_no_unlisted_function_is_over_the_limits() -> None:
    found = measured()
    allowed = listed()
    unlisted = {k: v for k, v in found.items() if k not in allowed}
    assert not unlisted, (
        f"over {MAX_LINES} lines or complexity {MAX_COMPLEXITY}: split them into named helpers "
        f"(or list each, with a reason, under {SECTION!r} in docs/architecture.md):\n"
        + "\n".join(f"  {k} ({v})" for k, v in sorted(unlisted.items()))
    )


def test_every_listed_function_is_still_over_a_limit() -> None:
    found = measured()
    stale = sorted(k for k in listed() if k not in found)
    assert not stale, "within the limits now (or gone): remove from docs/architecture.md:\n  " + "\n  ".join(stale)
