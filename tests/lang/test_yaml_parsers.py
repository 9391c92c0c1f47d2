"""libyaml and the pure-Python parser give the same data, positions and refusals.

``concur.lang.yamlsafe`` parses with libyaml (``ruamel.yaml.clib``) when it is installed and
with ruamel's pure parser otherwise (or under ``CONCUR_PURE_YAML=1``); either way concur builds
the data from the events itself. A pack must not mean something else, or fail elsewhere,
depending on which parser a machine has.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from concur.errors import PackError
from concur.lang import yamlsafe

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted([*ROOT.glob("formulas/**/*.yaml"), *ROOT.glob("workbooks/*.yaml"), *ROOT.glob("tests/data/*.yaml")])

has_libyaml = yamlsafe.uses_libyaml("a: 1\n")


def _positions(value: object) -> list[str]:
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, yamlsafe.YMap):
            out.append(str(v.loc))
            out += [f"{k}@{loc}" for k, loc in v.key_loc.items()]
            stack += list(v.values())
        elif isinstance(v, yamlsafe.YList):
            out.append(str(v.loc))
            out += [str(loc) for loc in v.item_loc]
            stack += list(v)
    return out


def _load(text: str, *, pure: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, object, object]:
    if pure:
        monkeypatch.setenv("CONCUR_PURE_YAML", "1")
    else:
        monkeypatch.delenv("CONCUR_PURE_YAML", raising=False)
    try:
        data = yamlsafe.load_yaml("f.yaml", text=text)
    except PackError as exc:
        return "refused", str(exc.where), exc.message
    return "loaded", data, _positions(data)


def test_libyaml_is_installed_where_ci_runs():
    if not has_libyaml:
        if os.environ.get("CI") == "true":
            pytest.fail("ruamel.yaml.clib is a dependency on CPython but is not importable")
        pytest.skip("ruamel.yaml.clib not installed: only the pure parser is in use")


@pytest.mark.skipif(not has_libyaml, reason="ruamel.yaml.clib not installed")
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_file_loads_the_same_with_either_parser(path, monkeypatch):
    text = path.read_text(encoding="utf-8")
    pure = _load(text, pure=True, monkeypatch=monkeypatch)
    fast = _load(text, pure=False, monkeypatch=monkeypatch)
    assert pure[0] == "loaded"
    assert fast == pure


HOSTILE = {
    "deep nesting": "[" * 1000 + "]" * 1000 + "\n",
    "node flood": "[" + ",".join(["1"] * 30_000) + "]\n",
    "alias bomb": "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
    + "".join(f"{n}: &{n} [" + ", ".join([f"*{p}"] * 10) + "]\n" for p, n in zip("abcdefg", "bcdefgh")),
    "python tag": "a: !!python/object/apply:os.system ['true']\n",
    "merge key": "a: &a {x: 1}\nb:\n  <<: *a\n",
    "duplicate key": "a: 1\nb: 2\na: 3\n",
    "two documents": "a: 1\n---\nb: 2\n",
    "undefined alias": "a: *nowhere\n",
    "non-text key": "[1, 2]: 3\n",
    "empty": "# nothing\n",
}


@pytest.mark.skipif(not has_libyaml, reason="ruamel.yaml.clib not installed")
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_files_are_refused_at_the_same_place_by_either_parser(name, monkeypatch):
    pure = _load(HOSTILE[name], pure=True, monkeypatch=monkeypatch)
    fast = _load(HOSTILE[name], pure=False, monkeypatch=monkeypatch)
    assert pure[0] == "refused", pure
    assert fast == pure


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_unicode_line_separators_keep_editor_line_numbers(separator, monkeypatch):
    """libyaml counts U+2028/U+2029/NEL as line breaks, editors do not: such a file goes to the
    pure parser, so the error is on line 3 as an editor shows it, with libyaml installed or not."""
    assert not yamlsafe.uses_libyaml(f"a: x{separator}y\n")
    text = f'a: "x{separator}y"\nb: 1\nb: 2\n'
    kind, where, message = _load(text, pure=False, monkeypatch=monkeypatch)
    assert (kind, where) == ("refused", "f.yaml:3:1"), message


def test_a_lone_surrogate_never_reaches_libyaml():
    assert not yamlsafe.uses_libyaml("a: \udc80\n")


@pytest.mark.skipif(not has_libyaml, reason="ruamel.yaml.clib not installed")
def test_malformed_yaml_names_the_line_with_either_parser(monkeypatch):
    text = "name: p\nvariables:\n  a: {unit: s\n  b: 1\n"
    for pure in (True, False):
        kind, where, message = _load(text, pure=pure, monkeypatch=monkeypatch)
        assert kind == "refused" and str(where).startswith("f.yaml:4:"), (pure, where, message)
        assert str(message).startswith("invalid YAML:")


def test_a_refused_text_is_not_parsed_again(monkeypatch):
    """``concur check`` loads a pack that fails a second and third time to collect its problems;
    a text refused at the YAML level is refused again from memory (up to 20,000 nodes each time)."""
    calls = []
    parse = yamlsafe._parse

    def counted(name: str, text: str, fast: bool, key: object = None) -> object:
        calls.append(name)
        return parse(name, text, fast, key)

    monkeypatch.setattr(yamlsafe, "_parse", counted)
    deep = "[" * 40 + "]" * 40 + "\n"
    messages = set()
    for _ in range(3):
        with pytest.raises(PackError) as caught:
            yamlsafe.load_yaml("deep.yaml", text=deep)
        messages.add(str(caught.value))
    assert len(calls) == 1 and len(messages) == 1
    yamlsafe.load_yaml("ok.yaml", text="a: 1\n")
    yamlsafe.load_yaml("ok.yaml", text="a: 1\n")
    assert calls.count("ok.yaml") == 2  # a text that loads is built afresh each time (its events replayed)
    monkeypatch.setattr(yamlsafe, "MAX_DEPTH", 64)  # other limits: the text is judged afresh
    assert yamlsafe.load_yaml("deep.yaml", text=deep) is not None and len(calls) == 4
